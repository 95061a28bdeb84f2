"""Verify's memory, kept on disk: sets and indexes whose size is the run's.

A run may hold millions of episodes; what verify must remember per episode (which have
ended, where each rebuilt results row lies, which rows the given file has shown) goes
into one SQLite file in verify's temporary directory, so the process stays the same
size whatever the run's length. SQLite's page cache is capped; journaling and fsync are
off (the file dies with the check)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

__all__ = ["Scratch"]

_CACHE_KIB: Final = 8 * 1024
_BATCH: Final = 256


class Scratch:
    """Named sets of strings and one index of results rows (episode id -> line, offset)."""

    def __init__(self, directory: Path) -> None:
        self._db = sqlite3.connect(directory / "verify-scratch.sqlite", isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size=-{_CACHE_KIB}"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("CREATE TABLE members(name TEXT, item TEXT, PRIMARY KEY(name, item))")
        self._db.execute(
            "CREATE TABLE rows(ep TEXT PRIMARY KEY, line INT, offset INT, seen INT DEFAULT 0)"
            " WITHOUT ROWID"
        )
        self._db.execute("BEGIN")

    def close(self) -> None:
        self._db.close()

    def add(self, name: str, item: str) -> None:
        self._db.execute("INSERT OR IGNORE INTO members VALUES (?, ?)", (name, item))

    def has(self, name: str, item: str) -> bool:
        found = self._db.execute(
            "SELECT 1 FROM members WHERE name = ? AND item = ?", (name, item)
        ).fetchone()
        return found is not None

    def index_rows(self, rows: Iterable[tuple[str, int, int]]) -> None:
        """(episode id, line, byte offset) of every row of the rebuilt results file."""
        batch: list[tuple[str, int, int]] = []
        for row in rows:
            batch.append(row)
            if len(batch) == _BATCH:
                self._db.executemany("INSERT INTO rows(ep, line, offset) VALUES (?, ?, ?)", batch)
                batch.clear()
        self._db.executemany("INSERT INTO rows(ep, line, offset) VALUES (?, ?, ?)", batch)

    def see_row(self, ep: str) -> tuple[int, int, bool] | None:
        """(line, offset, seen before) of ``ep``'s rebuilt row, now marked seen; None when
        the rebuilt results have no such episode."""
        found = self._db.execute(
            "SELECT line, offset, seen FROM rows WHERE ep = ?", (ep,)
        ).fetchone()
        if found is None:
            return None
        if not found[2]:
            self._db.execute("UPDATE rows SET seen = 1 WHERE ep = ?", (ep,))
        return int(found[0]), int(found[1]), bool(found[2])

    def unseen_rows(self) -> Iterator[tuple[str, int]]:
        """(episode id, line) of every rebuilt row never seen, in line order."""
        cursor = self._db.execute("SELECT ep, line FROM rows WHERE seen = 0 ORDER BY line")
        for ep, line in cursor:
            yield str(ep), int(line)
