"""A third-party ledger plugin with deliberately weak oracles (issue 25, item 4).

Written as a plugin author would from docs/writing-a-provider.md, over the public API
only: a product that pays invoices into its own SQLite file (``payments``, plus one
``journal`` row per payment; ``invoices`` and ``drafts`` are seeded), the generic
all-tables oracle, and tasks whose oracles each ignore something the product writes.
The product validates what it is given (a known invoice, an amount it can parse), so
an adversary that submits ``"12.50-x"`` is refused and proves nothing: only mutating the
record itself shows what the oracle never reads.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import anyio.to_thread

from effectbench.model import (
    Category,
    DiffEffect,
    Insert,
    JSONScalar,
    OracleSpec,
    ParamRef,
    Row,
    Snapshot,
    Substrate,
    TaskSpec,
)
from effectbench.oracles.digest import SnapshotScope
from effectbench.oracles.sqlite import SqliteAllTablesOracle, read_all_tables
from effectbench.oracles.sqlite_store import SqliteStore
from effectbench.provider import EnvHandle, ProductResponse, ProvisionedEpisode

SCHEMA = (
    "CREATE TABLE invoices(id INTEGER PRIMARY KEY, number TEXT, total)",
    "CREATE TABLE drafts(id INTEGER PRIMARY KEY, memo TEXT)",
    (
        "CREATE TABLE payments(id INTEGER PRIMARY KEY, invoice_id INTEGER REFERENCES "
        "invoices(id), payee TEXT, amount, urgent, memo TEXT)"
    ),
    "CREATE TABLE journal(id INTEGER PRIMARY KEY, action TEXT, detail TEXT)",
)
SEED = (
    "INSERT INTO invoices(id, number, total) VALUES (1, 'INV-1', '12.50'), (2, 'INV-2', '99.00')",
    "INSERT INTO drafts(id, memo) VALUES (1, 'draft payment to globex')",
)
KEYS = {"payments": ("id",), "journal": ("id",), "invoices": ("id",), "drafts": ("id",)}
IDS = {
    "payments.id": "the store's surrogate key",
    "journal.id": "the store's surrogate key",
}


def _amount_ok(value: JSONScalar) -> bool:
    if not isinstance(value, str):
        return True
    try:
        Decimal(str(value))
    except InvalidOperation:
        return False
    return True


class LedgerDriver:
    """The product's one form: pay an invoice. Refuses an unknown invoice or an amount
    it cannot read, so a mutated submission never lands."""

    def __init__(self, db: Path) -> None:
        self.db = db

    def _pay(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        conn = sqlite3.connect(self.db, isolation_level=None)
        try:
            known = conn.execute(
                "SELECT 1 FROM invoices WHERE id = ?", (values.get("invoice_id"),)
            ).fetchone()
            if known is None or not _amount_ok(values.get("amount")):
                return ProductResponse(screen_says_saved=False, status=422, message="refused")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO payments(invoice_id, payee, amount, urgent, memo) "
                "VALUES (?, ?, ?, ?, ?)",
                [values.get(k) for k in ("invoice_id", "payee", "amount", "urgent", "memo")],
            )
            conn.execute(
                "INSERT INTO journal(action, detail) VALUES ('pay', ?)", (values.get("memo"),)
            )
            conn.execute("COMMIT")
        finally:
            conn.close()
        return ProductResponse(screen_says_saved=True, status=200, message="paid")

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        return await anyio.to_thread.run_sync(self._pay, values)


class PaymentsOnlyOracle:
    """A weak oracle of the kind a plugin author writes: it reads ``payments`` alone."""

    def __init__(self, db: Path) -> None:
        self.db = db

    async def read(self) -> Snapshot:
        snap = await anyio.to_thread.run_sync(read_all_tables, self.db)
        if not snap.readable:
            return snap
        rows: tuple[Row, ...] = snap.rows("payments")
        return Snapshot(readable=True, tables={"payments": rows})


def solution(amount: JSONScalar) -> dict[str, Any]:
    return {
        "invoice_id": 1,
        "payee": "acme",
        "amount": amount,
        "urgent": 0,
        "memo": ParamRef("memo"),
    }


def _fields(amount: JSONScalar, *, drop: Sequence[str] = ()) -> dict[str, Any]:
    fields = solution(amount)
    return {k: v for k, v in fields.items() if k not in drop}


JOURNAL = Insert("journal", {"action": "pay", "detail": ParamRef("memo")})


def ledger_task(
    name: str,
    effect: DiffEffect,
    *,
    amount: JSONScalar = "12.50",
    oracle: str = "all",
    irrelevant: Mapping[str, str] = IDS,
) -> TaskSpec:
    return TaskSpec(
        task_id=f"ledger::{name}",
        title=name,
        substrate=Substrate.WEB,
        category=Category.CONTROL,
        goal="Pay invoice INV-1 to acme for 12.50, not urgent, with this trial's memo.",
        expected_effect=effect,
        oracle=OracleSpec(
            tables=("payments",) if oracle == "payments" else tuple(sorted(KEYS)),
            irrelevant=dict(irrelevant),
        ),
        correct_action_available=True,
        params={"memo": "memo {tag}"},
        solution=solution(amount),
        fixture={"oracle": oracle},
    )


def sound(amount: JSONScalar = "12.50") -> DiffEffect:
    return DiffEffect(changes=(Insert("payments", _fields(amount)), JOURNAL), keys=KEYS)


def unchecked(column: str, amount: JSONScalar = "12.50") -> TaskSpec:
    """A task whose diff checks every payment field but ``column``."""
    effect = DiffEffect(
        changes=(Insert("payments", _fields(amount, drop=(column,))), JOURNAL), keys=KEYS
    )
    return ledger_task(f"unchecked_{column}_{type(amount).__name__}", effect, amount=amount)


WEAK: Mapping[str, TaskSpec] = {
    # 1. the amount, a string, is never checked (an adversary's "12.50-x" is refused)
    "amount": unchecked("amount"),
    # 2. the invoice the payment settles is never checked
    "invoice": unchecked("invoice_id"),
    # 3. an allow-list covering every other table: deleting a draft passes
    "allow_all": ledger_task(
        "allow_all",
        DiffEffect(
            changes=(Insert("payments", _fields("12.50")), JOURNAL),
            keys=KEYS,
            allow=("drafts.*", "invoices.*"),
        ),
    ),
    # 4. a diff insert that never checks the new value
    "insert_unchecked": ledger_task(
        "insert_unchecked",
        DiffEffect(changes=(Insert("payments", {"payee": "acme"}), JOURNAL), keys=KEYS),
    ),
    # 5. the second table the product writes, allow-listed instead of checked
    "journal_allowed": ledger_task(
        "journal_allowed",
        DiffEffect(
            changes=(Insert("payments", _fields("12.50")),), keys=KEYS, allow=("journal.*",)
        ),
    ),
    # 6. an oracle that reads one of the product's two tables
    "one_table": ledger_task(
        "one_table",
        DiffEffect(changes=(Insert("payments", _fields("12.50")),), keys=KEYS),
        oracle="payments",
    ),
}
"""Each weak variant, and (the test's expectation) what the audit must name."""
NAMED: Mapping[str, str] = {
    "amount": "payments.amount",
    "invoice": "payments.invoice_id",
    "allow_all": "drafts.memo",
    "insert_unchecked": "payments.memo",
    "journal_allowed": "journal.action",
    "one_table": "journal.action",
}


class LedgerProvider:
    """The plugin. ``tasks``: the pack (default: the sound task and every weak variant);
    ``scoped``: its oracle logs full rows only of the tables each task's effect names."""

    name = "ledger"
    version = "0.1"

    def __init__(self, tasks: Sequence[TaskSpec] | None = None, *, scoped: bool = False) -> None:
        self._scoped = scoped
        self._tasks = (
            list(tasks)
            if tasks is not None
            else [
                ledger_task("sound", sound()),
                *WEAK.values(),
            ]
        )
        self._root: Path | None = None

    def tasks(self) -> Sequence[TaskSpec]:
        return list(self._tasks)

    async def start(self) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="ledger-"))

    async def stop(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        assert self._root is not None
        db = Path(tempfile.mkdtemp(dir=self._root)) / "ledger.sqlite"
        conn = sqlite3.connect(db, isolation_level=None)
        for stmt in (*SCHEMA, *SEED):
            conn.execute(stmt)
        conn.close()

        async def teardown() -> None:
            shutil.rmtree(db.parent, ignore_errors=True)

        env = EnvHandle(channels={"app": "ledger"}, driver=LedgerDriver(db))
        if task.fixture.get("oracle") == "payments":  # its own oracle: the one hook
            return ProvisionedEpisode(
                env=env, oracle=PaymentsOnlyOracle(db), teardown=teardown, store=SqliteStore(db)
            )
        scope = SnapshotScope.of(task.expected_effect) if self._scoped else None
        oracle = (
            SqliteAllTablesOracle(db) if scope is None else SqliteAllTablesOracle(db, scope=scope)
        )
        return ProvisionedEpisode(env=env, oracle=oracle, teardown=teardown)
