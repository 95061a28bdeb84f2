"""The mutation audit's write handle on a SQLite file (``effectbench.core.store``).

Tables come from ``sqlite_master``, keys from ``PRAGMA table_info``, declared references
from ``PRAGMA foreign_key_list``. A row is located by its ``rowid`` (a ``WITHOUT ROWID``
table: by its primary key, as JSON). Each call opens its own connection and commits
before it returns, so the product and the oracle see the change at once. ``save`` is the
database's serialised image and ``restore`` copies such an image back over the file
with SQLite's online backup (the product may keep its connections open).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import anyio.to_thread
import attrs
import orjson

from effectbench.core.model import JSONScalar
from effectbench.core.store import Locator, StoredRow, StoredTable, StoreRefused
from effectbench.oracles.sqlite import BUSY_TIMEOUT_S, _quote_ident, _scalar, user_tables

__all__ = ["SqliteStore"]

_T = TypeVar("_T")


def _fspath(path: str | os.PathLike[str]) -> str:
    return os.fspath(path)


def _key(conn: sqlite3.Connection, table: str) -> tuple[str, ...]:
    info = conn.execute(f"PRAGMA table_info({_quote_ident(table)})").fetchall()
    return tuple(str(r[1]) for r in sorted((r for r in info if r[5]), key=lambda r: int(r[5])))


def _references(conn: sqlite3.Connection, table: str) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for r in conn.execute(f"PRAGMA foreign_key_list({_quote_ident(table)})").fetchall():
        target, col, to = str(r[2]), str(r[3]), r[4]
        out[col] = (target, str(to) if to is not None else "rowid")
    return out


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    try:
        conn.execute(f"SELECT rowid FROM {_quote_ident(table)} LIMIT 0")
    except sqlite3.OperationalError:
        return False
    return True


@attrs.frozen
class SqliteStore:
    """``RecordStore`` over one SQLite file."""

    db_path: str = attrs.field(converter=_fspath)
    timeout: float = BUSY_TIMEOUT_S

    def _connect(self) -> sqlite3.Connection:
        if not os.path.exists(self.db_path):
            raise StoreRefused(f"no database at {self.db_path}")
        return sqlite3.connect(self.db_path, timeout=self.timeout, isolation_level=None)

    async def _run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        def call() -> _T:
            conn = self._connect()
            try:
                return work(conn)
            except sqlite3.Error as exc:
                raise StoreRefused(f"{type(exc).__name__}: {exc}") from None
            finally:
                conn.close()

        return await anyio.to_thread.run_sync(call)

    async def tables(self) -> Sequence[StoredTable]:
        def work(conn: sqlite3.Connection) -> list[StoredTable]:
            return [StoredTable(t, _key(conn, t), _references(conn, t)) for t in user_tables(conn)]

        return await self._run(work)

    async def rows(self, table: str) -> Sequence[StoredRow]:
        def work(conn: sqlite3.Connection) -> list[StoredRow]:
            if _has_rowid(conn, table):
                cur = conn.execute(f"SELECT rowid, * FROM {_quote_ident(table)} ORDER BY rowid")
                names = [d[0] for d in cur.description][1:]
                return [
                    StoredRow(int(r[0]), {n: _scalar(v) for n, v in zip(names, r[1:], strict=True)})
                    for r in cur.fetchall()
                ]
            key = _key(conn, table)
            cur = conn.execute(f"SELECT * FROM {_quote_ident(table)}")
            names = [d[0] for d in cur.description]
            out = []
            for r in cur.fetchall():
                values = {n: _scalar(v) for n, v in zip(names, r, strict=True)}
                out.append(StoredRow(orjson.dumps([values[k] for k in key]).decode(), values))
            return sorted(out, key=lambda s: str(s.locator))

        return await self._run(work)

    def _where(
        self, conn: sqlite3.Connection, table: str, locator: Locator
    ) -> tuple[str, list[object]]:
        if isinstance(locator, int):
            return "rowid = ?", [locator]
        key = _key(conn, table)
        values = orjson.loads(locator)
        return " AND ".join(f"{_quote_ident(k)} IS ?" for k in key), list(values)

    async def update(self, table: str, locator: Locator, values: Mapping[str, JSONScalar]) -> None:
        def work(conn: sqlite3.Connection) -> None:
            where, args = self._where(conn, table, locator)
            sets = ", ".join(f"{_quote_ident(c)} = ?" for c in values)
            cur = conn.execute(
                f"UPDATE {_quote_ident(table)} SET {sets} WHERE {where}", [*values.values(), *args]
            )
            if cur.rowcount != 1:
                raise StoreRefused(f"{table}: no row at {locator!r}")

        await self._run(work)

    async def delete(self, table: str, locator: Locator) -> None:
        def work(conn: sqlite3.Connection) -> None:
            where, args = self._where(conn, table, locator)
            cur = conn.execute(f"DELETE FROM {_quote_ident(table)} WHERE {where}", args)
            if cur.rowcount != 1:
                raise StoreRefused(f"{table}: no row at {locator!r}")

        await self._run(work)

    async def insert(self, table: str, values: Mapping[str, JSONScalar]) -> None:
        def work(conn: sqlite3.Connection) -> None:
            if not values:
                conn.execute(f"INSERT INTO {_quote_ident(table)} DEFAULT VALUES")
                return
            cols = ", ".join(_quote_ident(c) for c in values)
            marks = ", ".join("?" for _ in values)
            query = f"INSERT INTO {_quote_ident(table)} ({cols}) VALUES ({marks})"
            conn.execute(query, list(values.values()))

        await self._run(work)

    async def save(self) -> bytes:
        def work(conn: sqlite3.Connection) -> bytes:
            image = bytearray(conn.serialize())
            # an in-memory copy cannot be in WAL mode: mark the image a rollback-journal
            # file (header bytes 18-19); the backup keeps the file's own journal mode
            if image[18:20] == b"\x02\x02":
                image[18:20] = b"\x01\x01"
            return bytes(image)

        return await self._run(work)

    async def restore(self, saved: bytes) -> None:
        def work(conn: sqlite3.Connection) -> None:
            image = sqlite3.connect(":memory:")
            try:
                image.deserialize(saved)
                image.backup(conn)
            finally:
                image.close()

        await self._run(work)
