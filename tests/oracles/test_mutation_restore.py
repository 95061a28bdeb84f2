"""The mutation audit on a store that can restore a saved state: one twin, the reference
run once, each mutation applied and undone in place; the same score as fresh twins."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from ledger_plugin import LedgerProvider, ledger_task, sound

from effectbench.audit.report import AuditReport
from effectbench.audit.runner import audit_provider
from effectbench.core.store import Locator, RestorableStore, StoredRow, StoredTable
from effectbench.model import JSONScalar, TaskSpec
from effectbench.oracles.sqlite import SqliteAllTablesOracle
from effectbench.oracles.sqlite_store import SqliteStore
from effectbench.provider import ProvisionedEpisode


def test_a_sqlite_store_gives_back_the_state_it_saved_with_the_product_connected(
    tmp_path: Path,
) -> None:
    db = tmp_path / "wal.sqlite"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = wal")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.executemany("INSERT INTO t (v) VALUES (?)", [("a",), ("b",)])
    product = sqlite3.connect(db)  # another process's connection, kept open throughout
    assert product.execute("SELECT count(*) FROM t").fetchone() == (2,)
    store = SqliteStore(db)

    async def go() -> tuple[Sequence[StoredRow], Sequence[StoredRow]]:
        before = await store.rows("t")
        saved = await store.save()
        await store.update("t", 1, {"v": "mutated"})
        await store.delete("t", 2)
        await store.insert("t", {"id": 9, "v": "extra"})
        await store.restore(saved)
        return before, await store.rows("t")

    before, after = anyio.run(go)
    assert after == before
    assert product.execute("SELECT id, v FROM t ORDER BY id").fetchall() == [(1, "a"), (2, "b")]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert isinstance(store, RestorableStore)


@attrs.frozen
class _PlainStore:
    """A real SQLite store offering only the five RecordStore methods (no restore)."""

    inner: SqliteStore

    async def tables(self) -> Sequence[StoredTable]:
        return await self.inner.tables()

    async def rows(self, table: str) -> Sequence[StoredRow]:
        return await self.inner.rows(table)

    async def update(self, table: str, locator: Locator, values: Mapping[str, JSONScalar]) -> None:
        await self.inner.update(table, locator, values)

    async def delete(self, table: str, locator: Locator) -> None:
        await self.inner.delete(table, locator)

    async def insert(self, table: str, values: Mapping[str, JSONScalar]) -> None:
        await self.inner.insert(table, values)


class _Counting(LedgerProvider):
    """The ledger plugin, counting its provisions; ``plain``: its store cannot restore."""

    def __init__(self, tasks: Sequence[TaskSpec], *, plain: bool) -> None:
        super().__init__(tasks)
        self.provisions = 0
        self._plain = plain

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        self.provisions += 1
        episode = await super().provision(task, trial, params)
        if not self._plain:
            return episode
        assert isinstance(episode.oracle, SqliteAllTablesOracle)
        return attrs.evolve(episode, store=_PlainStore(SqliteStore(episode.oracle.db_path)))


def _audit(provider: Any, out: Path) -> AuditReport:
    async def go() -> AuditReport:
        return await audit_provider(provider, out_dir=out, trials=1, concurrency=2)

    return anyio.run(go)


@pytest.mark.timeout(240)
def test_a_restorable_store_needs_one_twin_and_scores_as_fresh_twins_do(tmp_path: Path) -> None:
    tasks = [ledger_task("sound", sound())]
    fast, slow = _Counting(tasks, plain=False), _Counting(tasks, plain=True)
    in_place = _audit(fast, tmp_path / "in-place")
    fresh = _audit(slow, tmp_path / "fresh")
    (a,), (b,) = in_place.tasks, fresh.tasks
    assert a.mutation is not None and b.mutation is not None
    assert a.mutation.applied > 0
    assert a.mutation.plain() == b.mutation.plain()
    assert (a.status, a.reasons) == (b.status, b.reasons)
    # fresh twins: one per applied or refused mutation besides the base twin; in place: none
    assert slow.provisions - fast.provisions == a.mutation.applied + a.mutation.refused
