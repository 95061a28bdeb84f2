"""Snapshot scope (issue 29 item 4): tables outside a task's effect are logged as a digest
per row; the judge's verdict is the one it gives on full rows, every change still named."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import anyio
import orjson
import pytest
from ledger_plugin import LedgerProvider

from effectbench.audit.report import AuditReport
from effectbench.audit.runner import audit_provider
from effectbench.model import (
    AnyEffect,
    DiffEffect,
    Effect,
    RecordWritten,
    Snapshot,
    Update,
)
from effectbench.oracles.digest import DIGEST_FIELD, SnapshotScope
from effectbench.oracles.sqlite import read_all_tables
from effectbench.scoring.judge import judge

POINTER = re.compile(r" \[events\.jsonl#\d+\]")
SCHEMA = (
    "CREATE TABLE orders(id INTEGER PRIMARY KEY, item TEXT, qty, touched)",
    "CREATE TABLE stock(id INTEGER PRIMARY KEY, sku TEXT, count, price REAL, moved)",
    "CREATE TABLE tags(label TEXT, weight)",  # no id: rows pair by content
    "INSERT INTO orders VALUES (1, 'bolt', 2, 'x')",
    "INSERT INTO stock VALUES (1, 'bolt', 40, 0.25, 'a'), (2, 'nut', 7, 0.10, 'a')",
    "INSERT INTO tags VALUES ('red', 1), ('blue', 2)",
)
DIFF = DiffEffect(
    changes=(Update("orders", {"id": 1}, {"qty": 3}),),
    keys={"orders": ("id",), "stock": ("id",)},
    allow=("orders.touched", "stock.moved"),
)
INSERT = Effect(
    RecordWritten(
        "orders",
        {"item": "nut"},
        expected_count=1,
        forbid_collateral_loss=True,
        forbid_stray_writes=True,
    )
)
EFFECTS = {
    "diff": (DIFF, "UPDATE orders SET qty = 3, touched = 'y' WHERE id = 1"),
    "insert": (INSERT, "INSERT INTO orders VALUES (2, 'nut', 1, 'x')"),
}
COLLATERAL = {
    "a value elsewhere": "UPDATE stock SET count = 39 WHERE id = 2",
    "a value's type only": "UPDATE stock SET count = '40' WHERE id = 1",
    "an integer for a real": "UPDATE stock SET price = 0 WHERE id = 2",
    "a row added": "INSERT INTO stock VALUES (3, 'washer', 1, 0.05, 'a')",
    "a row removed": "DELETE FROM stock WHERE id = 1",
    "an id-less row changed": "UPDATE tags SET weight = 5 WHERE label = 'red'",
    "an allowed column moved": "UPDATE stock SET moved = 'b' WHERE id = 1",
}


def _db(tmp_path: Path, *writes: str) -> Path:
    path = tmp_path / f"db{len(list(tmp_path.iterdir()))}.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for stmt in (*SCHEMA, *writes):
        conn.execute(stmt)
    conn.close()
    return path


def _reads(tmp_path: Path, effect: AnyEffect, *writes: str) -> dict[str, tuple[Snapshot, Snapshot]]:
    pre, post = _db(tmp_path), _db(tmp_path, *writes)
    scope = SnapshotScope.of(effect)
    return {
        "full": (read_all_tables(pre), read_all_tables(post)),
        "scoped": (read_all_tables(pre, scope=scope), read_all_tables(post, scope=scope)),
    }


@pytest.mark.parametrize("kind", sorted(EFFECTS))
@pytest.mark.parametrize("change", [None, *COLLATERAL])
def test_the_verdict_on_digested_rows_is_the_verdict_on_full_rows(
    tmp_path: Path, kind: str, change: str | None
) -> None:
    effect, correct = EFFECTS[kind]
    writes = (correct, *(() if change is None else (COLLATERAL[change],)))
    reads = _reads(tmp_path, effect, *writes)
    full, scoped = (judge(effect, *reads[k]) for k in ("full", "scoped"))
    assert (scoped.status, scoped.true_state, scoped.observed_count, scoped.expected_count) == (
        full.status,
        full.true_state,
        full.observed_count,
        full.expected_count,
    )
    assert [(m.kind, m.table) for m in scoped.mismatches] == [
        (m.kind, m.table) for m in full.mismatches
    ]
    pre = reads["scoped"][0]
    assert pre.rows("orders") == reads["full"][0].rows("orders")  # the effect's table: full
    assert all(set(r) == {"id", DIGEST_FIELD} for r in pre.rows("stock"))
    assert all(set(r) == {DIGEST_FIELD} for r in pre.rows("tags"))
    if change in ("a value elsewhere", "a row removed") and isinstance(effect, DiffEffect):
        (where,) = scoped.mismatches
        assert where.table == "stock" and where.row == f"[id={2 if 'value' in change else 1}]"


def test_a_scope_leaves_a_reference_diff_in_full_and_costs_a_fraction_of_the_bytes(
    tmp_path: Path,
) -> None:
    reference = DiffEffect(mode="reference", reference="oracle")
    assert SnapshotScope.of(reference).full is None
    stock = [f"INSERT INTO stock VALUES ({i}, 'sku-{i:04}', {i}, 1.5, 'a')" for i in range(3, 300)]
    path = _db(tmp_path, *stock)
    full, scoped = read_all_tables(path), read_all_tables(path, scope=SnapshotScope.of(DIFF))
    assert read_all_tables(path, scope=SnapshotScope.of(reference)) == full
    size: Callable[[Snapshot], int] = lambda s: len(orjson.dumps(dict(s.tables)))
    assert size(scoped) < size(full) * 0.9


def _audit(provider: LedgerProvider, out: Path) -> AuditReport:
    async def go() -> AuditReport:
        return await audit_provider(provider, out_dir=out, trials=1, concurrency=4)

    return anyio.run(go)


def test_a_scoped_oracles_audit_gives_every_task_the_same_verdict(tmp_path: Path) -> None:
    """The ledger's seeded invoices and drafts, which no task's effect names, are logged as
    digests, and the mutation audit still kills (and excuses) exactly what it did on full
    rows: every weak oracle still refused, the sound one audited."""
    full = _audit(LedgerProvider(), tmp_path / "full")
    scoped = _audit(LedgerProvider(scoped=True), tmp_path / "scoped")

    def verdicts(report: AuditReport) -> dict[str, object]:
        """Each task's status, reasons and mutation score, log line pointers left out (the
        episodes run concurrently, so lines come in another order)."""
        return {
            t.task_id: POINTER.sub("", repr((t.status, sorted(t.reasons), t.mutation)))
            for t in report.tasks
        }

    assert verdicts(scoped) == verdicts(full)
    sound = next(t for t in scoped.tasks if t.task_id == "ledger::sound")
    assert sound.status == "audited" and sound.mutation is not None
    assert sound.mutation.killed == sound.mutation.applied > 0
    events = [orjson.loads(x) for x in scoped.log_path.read_bytes().splitlines()]
    (pre, *_) = [e["data"]["snapshot"] for e in events if e["type"] == "episode.pre_snapshot"]
    assert all(set(r) == {"id", DIGEST_FIELD} for r in pre["tables"]["invoices"])
