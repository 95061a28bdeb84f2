"""The harness oracle: reads one episode's database over its own read-only connection.

It shares nothing with the product: not the product's connection, not its HTTP
app. The connection is opened with ``mode=ro`` (writes fail), runs in autocommit
mode and drains every cursor, so no read transaction stays open between reads
(an open one would pin a stale snapshot).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from effectbench.model import Row, Snapshot
from effectbench_mockmed.store import BUSY_TIMEOUT_MS

_TABLES = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
)


class MockMedOracle:
    """``read()`` returns every user table's raw rows; never raises."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(
                f"file:{self._path}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._conn = conn
        return self._conn

    async def read(self) -> Snapshot:
        if self._closed:
            return Snapshot.unreadable("the episode was torn down; its database is gone")
        try:
            conn = self._connect()
            tables: dict[str, tuple[Row, ...]] = {}
            with closing(conn.execute(_TABLES)) as cur:
                names = [str(r[0]) for r in cur.fetchall()]
            for name in names:
                quoted = '"' + name.replace('"', '""') + '"'
                with closing(conn.execute(f"SELECT * FROM {quoted} ORDER BY rowid")) as cur:
                    cols = [d[0] for d in cur.description]
                    tables[name] = tuple(dict(zip(cols, r)) for r in cur.fetchall())
            if not names:
                return Snapshot.unreadable(
                    f"no tables in {self._path.name}: the store is not initialised"
                )
            return Snapshot(readable=True, tables=tables)
        except (sqlite3.Error, OSError) as exc:
            self.close_connection()
            return Snapshot.unreadable(f"sqlite read failed: {type(exc).__name__}: {exc}")

    def close_connection(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def close(self) -> None:
        """Release the connection; later reads report the store as unreadable."""
        self._closed = True
        self.close_connection()
