"""An in-memory provider: a dict of tables per episode, a form that writes it, an oracle
that reads it. No I/O, so tests and benches measure the harness (or an arm) alone.

A task's ``fixture["mode"]`` injects one failure (``MODES``); the product's form is a
``MemoryForm`` per task (which values it accepts, whether it upserts, a fault that
rewrites what is stored, the ``confusable`` channel).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

import anyio
import attrs
import orjson

from effectbench.core.model import (
    Category,
    DiffEffect,
    Effect,
    FieldEquals,
    JSONScalar,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Snapshot,
    TaskSpec,
)
from effectbench.core.provider import EnvHandle, ProductResponse, ProvisionedEpisode, SkipEpisode
from effectbench.core.store import Locator, StoredRow, StoredTable, StoreRefused

__all__ = [
    "MODES",
    "InMemoryProvider",
    "MemoryForm",
    "MemoryStore",
    "every_mode",
    "memory_task",
]

MODES: Final = (
    "ok",
    "phantom",
    "provision_fails",
    "provision_hangs",
    "skip",
    "oracle_flaky",
    "oracle_dead",
    "oracle_hangs_once",
    "post_dead",
    "teardown_fails",
)
"""``fixture["mode"]`` values: ``ok`` (any unknown mode too) behaves; ``phantom``: the
screen says saved, nothing is stored; ``provision_fails`` raises, ``provision_hangs``
never returns, ``skip`` raises SkipEpisode; ``oracle_flaky``: the first post-read is
unreadable; ``oracle_dead``: every read is; ``oracle_hangs_once``: the first post-read
never returns; ``post_dead``: readable before the arm, never after; ``teardown_fails``
raises in teardown."""


def memory_task(
    mode: str = "ok", *, category: Category = Category.CONTROL, correct: bool = True
) -> TaskSpec:
    """A control task over table ``notes``: write this trial's note for owner p1."""
    return TaskSpec(
        task_id=f"fake::{mode}",
        title=f"fake {mode}",
        substrate="web",
        category=category,
        goal="Record the note for owner p1 and save it.",
        expected_effect=Effect(
            RecordWritten(table="notes", selector={"owner": "p1"}),
            (FieldEquals("note", ParamRef("note")),),
        ),
        oracle=OracleSpec(tables=("notes",)),
        correct_action_available=correct,
        params={"note": "note {tag}"},
        solution={"owner": "p1", "note": ParamRef("note")},
        fixture={"mode": mode},
    )


@attrs.frozen
class MemoryForm:
    """The in-memory product's one form.

    ``table``: where a submission goes (None: the task's expected-effect table).
    ``choices``: field -> the values the form offers; any other value is refused (422),
    nothing stored. ``upsert_on``: update the row whose these fields equal the
    submission's, else insert. ``fault``: rewrites the values before they are stored
    (a planted product fault). ``confusable``: the record an arm could confuse with the
    intended one, given as the ``confusable`` channel (docs/writing-a-provider.md).
    ``readback``: offer the product's own readback (``EnvHandle.verifier``)."""

    table: str | None = None
    choices: Mapping[str, tuple[JSONScalar, ...]] = attrs.field(factory=dict)
    upsert_on: tuple[str, ...] = ()
    fault: Callable[[dict[str, JSONScalar]], dict[str, JSONScalar]] | None = None
    confusable: Mapping[str, JSONScalar] | None = None
    readback: bool = False


class MemoryStore:
    """One episode's record: table -> rows, each with an ``id`` assigned in order."""

    def __init__(
        self, tables: Sequence[str], seed: Mapping[str, Sequence[Mapping[str, JSONScalar]]]
    ):
        self.tables: dict[str, list[dict[str, JSONScalar]]] = {t: [] for t in tables}
        self._next = 0
        for table, rows in seed.items():
            for row in rows:
                self.insert(table, dict(row))

    def insert(self, table: str, values: Mapping[str, JSONScalar]) -> None:
        self._next += 1
        self.tables.setdefault(table, []).append({"id": self._next, **values})

    def snapshot(self) -> Snapshot:
        return Snapshot(
            readable=True,
            tables={t: tuple(dict(r) for r in rows) for t, rows in self.tables.items()},
        )


class _MemoryRecordStore:
    """The mutation audit's write handle on a ``MemoryStore`` (effectbench.core.store):
    rows are located by their ``id``."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def tables(self) -> Sequence[StoredTable]:
        return [StoredTable(t, ("id",)) for t in sorted(self.store.tables)]

    async def rows(self, table: str) -> Sequence[StoredRow]:
        return [StoredRow(_locator(r.get("id")), dict(r)) for r in self.store.tables.get(table, [])]

    def _index(self, table: str, locator: Locator) -> int:
        for i, r in enumerate(self.store.tables.get(table, [])):
            if _locator(r.get("id")) == locator:
                return i
        raise StoreRefused(f"{table}: no row with id {locator!r}")

    async def update(self, table: str, locator: Locator, values: Mapping[str, JSONScalar]) -> None:
        self.store.tables[table][self._index(table, locator)].update(values)

    async def delete(self, table: str, locator: Locator) -> None:
        del self.store.tables[table][self._index(table, locator)]

    async def insert(self, table: str, values: Mapping[str, JSONScalar]) -> None:
        rows = self.store.tables.setdefault(table, [])
        if "id" in values and any(r.get("id") == values["id"] for r in rows):
            raise StoreRefused(f"{table}: id {values['id']!r} is taken")
        self.store.insert(table, {k: v for k, v in values.items() if k != "id"})
        if "id" in values:
            rows[-1]["id"] = values["id"]


def _locator(value: JSONScalar) -> Locator:
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else str(value)


class _Form:
    def __init__(self, store: MemoryStore, form: MemoryForm, table: str, mode: str) -> None:
        self.store, self.form, self.table, self.mode = store, form, table, mode

    async def submit(self, values: Mapping[str, JSONScalar]) -> ProductResponse:
        for name, allowed in self.form.choices.items():
            if values.get(name) not in allowed:
                return ProductResponse(
                    screen_says_saved=False, status=422, message=f"Choose a valid {name}"
                )
        if self.mode == "phantom":  # the screen says saved, nothing is stored
            return ProductResponse(screen_says_saved=True, status=200, message="saved")
        stored = dict(values) if self.form.fault is None else self.form.fault(dict(values))
        rows = self.store.tables.setdefault(self.table, [])
        keys = self.form.upsert_on
        match = [r for r in rows if keys and all(r.get(k) == stored.get(k) for k in keys)]
        if match:
            match[0].update(stored)
        else:
            self.store.insert(self.table, stored)
        return ProductResponse(screen_says_saved=True, status=200, message="saved")


class _Oracle:
    def __init__(self, store: MemoryStore, mode: str) -> None:
        self.store, self.mode, self.reads = store, mode, 0

    async def read(self) -> Snapshot:
        self.reads += 1
        if self.mode == "oracle_hangs_once" and self.reads == 2:  # the first post-read
            await anyio.sleep_forever()
        dead = (
            self.mode == "oracle_dead"
            or (self.mode == "oracle_flaky" and self.reads == 2)
            or (self.mode == "post_dead" and self.reads > 1)
        )
        return Snapshot.unreadable("store offline") if dead else self.store.snapshot()


class _Readback:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def read(self) -> Snapshot:
        return self.store.snapshot()


class InMemoryProvider:
    """A BenchmarkProvider over a per-episode ``MemoryStore``.

    ``modes``: one ``memory_task`` per failure mode (default: just ``ok``), each repeated
    ``copies`` times with the copy's index appended to its id; or ``tasks`` of your own.
    ``form``: the product's form for every task, or a function of the task. ``started``,
    ``stopped`` and ``torn_down`` count the lifecycle calls, for tests to assert on."""

    name = "fake"
    version = "1.0"

    def __init__(
        self,
        modes: Sequence[str] = ("ok",),
        *,
        copies: int = 1,
        tasks: Sequence[TaskSpec] | None = None,
        form: MemoryForm | Callable[[TaskSpec], MemoryForm] = MemoryForm(),
    ) -> None:
        if tasks is None:
            tasks = [memory_task(m) for m in modes]
            if copies > 1:
                tasks = [
                    attrs.evolve(t, task_id=f"{t.task_id}{i}") for t in tasks for i in range(copies)
                ]
        self._tasks = list(tasks)
        self._form = form
        self.started = self.stopped = self.torn_down = 0

    def tasks(self) -> Sequence[TaskSpec]:
        return list(self._tasks)

    async def start(self) -> None:
        self.started += 1

    async def stop(self) -> None:
        self.stopped += 1

    def form_of(self, task: TaskSpec) -> MemoryForm:
        return self._form if isinstance(self._form, MemoryForm) else self._form(task)

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        mode = str(task.fixture.get("mode", "ok"))
        if mode == "provision_fails":
            raise ConnectionError("database container did not come up")
        if mode == "provision_hangs":
            await anyio.sleep_forever()
        if mode == "skip":
            raise SkipEpisode("this host has no desktop substrate")
        form = self.form_of(task)
        table = form.table or _effect_table(task)
        store = MemoryStore((*task.oracle.tables, table), task.initial_state)
        channels = {"base_url": "memory://"}
        if form.confusable is not None:
            channels["confusable"] = orjson.dumps(dict(form.confusable)).decode()

        async def teardown() -> None:
            self.torn_down += 1
            if mode == "teardown_fails":
                raise OSError("could not remove the episode database")

        env = EnvHandle(
            channels=channels,
            driver=_Form(store, form, table, mode),
            verifier=_Readback(store) if form.readback else None,
        )
        return ProvisionedEpisode(
            env=env,
            oracle=_Oracle(store, mode),
            teardown=teardown,
            store=_MemoryRecordStore(store),
        )


def every_mode() -> InMemoryProvider:
    """Every failure mode of ``MODES`` as its own task (a zero-argument factory, so
    ``--provider effectbench.testing:every_mode`` works)."""
    return InMemoryProvider(tuple(m for m in MODES if "hangs" not in m))


def _effect_table(task: TaskSpec) -> str:
    """The table the form writes when the task's form does not name one: the insert
    clause's table, or the first table a state diff changes."""
    effect = task.expected_effect
    if isinstance(effect, DiffEffect):
        if not effect.changes:
            raise ValueError(
                f"task {task.task_id}: a reference-mode diff names no table; give MemoryForm a "
                "table"
            )
        return effect.changes[0].table
    return effect.record_written.table
