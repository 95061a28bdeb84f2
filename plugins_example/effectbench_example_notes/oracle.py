"""The harness oracle: reads every table of an episode's database, read-only.

It never goes through the app, and the arm is never handed it. ``mode=ro`` makes the
connection unable to write. Each read takes every table inside one read transaction
(a consistent cut) on a fresh connection it then closes, so no transaction is left
open to pin a stale view and the next read sees the latest commit.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio.to_thread

from effectbench.model import Row, Snapshot


class NotesOracle:
    def __init__(self, path: Path) -> None:
        self._path = path

    def connect(self) -> sqlite3.Connection:
        """The only way this oracle opens the database: read-only, and never creating it."""
        conn = sqlite3.connect(
            f"{self._path.as_uri()}?mode=ro", uri=True, timeout=5.0, isolation_level=None
        )
        conn.row_factory = sqlite3.Row
        return conn

    def _read(self) -> dict[str, tuple[Row, ...]]:
        conn = self.connect()
        try:
            conn.execute("BEGIN")  # one read transaction: every table from the same commit
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                    "'sqlite_%' ORDER BY name"
                )
            ]
            tables: dict[str, tuple[Row, ...]] = {}
            for name in names:
                quoted = '"' + name.replace('"', '""') + '"'
                tables[name] = tuple(
                    dict(r) for r in conn.execute(f"SELECT * FROM {quoted} ORDER BY rowid")
                )
            conn.execute("COMMIT")
            return tables
        finally:
            conn.close()

    async def read(self) -> Snapshot:
        """Raw rows of every table; an unreadable store is a Snapshot, never an exception."""
        try:
            tables = await anyio.to_thread.run_sync(self._read)
        except (sqlite3.Error, OSError) as exc:
            return Snapshot.unreadable(f"{type(exc).__name__}: {exc}")
        return Snapshot(readable=True, tables=tables)
