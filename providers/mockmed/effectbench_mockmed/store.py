"""The MockMed system of record: one SQLite file per episode, owned by the product.

Only the product (the HTTP app) writes through :class:`EncounterStore`. The harness
oracle opens its own read-only connection to the same file (see ``oracle.py``).
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import attrs

from effectbench.model import JSONScalar, Row
from effectbench_mockmed.faults import Fault, StoreFault

TABLE: Final = "encounters"
COLUMNS: Final[tuple[str, ...]] = ("id", "patient_id", "type", "note", "source", "key")
SCHEMA: Final = (
    "CREATE TABLE encounters(id INTEGER PRIMARY KEY AUTOINCREMENT, patient_id TEXT, "
    "type TEXT, note TEXT, source TEXT, key TEXT)"
)
BUSY_TIMEOUT_MS: Final = 5000

_INSERT: Final = (
    "INSERT INTO encounters(patient_id, type, note, source, key) VALUES (?, ?, ?, ?, ?)"
)
_SEED_COLUMNS: Final = frozenset(COLUMNS)


def build_template(path: Path) -> None:
    """Create an empty WAL-mode database with the schema, copied for every episode.

    Copying a ready file is cheaper than creating the schema per episode.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(SCHEMA)
    finally:
        conn.close()


@attrs.frozen
class Submission:
    """One encounter as the user entered it."""

    patient_id: str
    type: str
    note: str
    key: str | None
    source: str


class EncounterStore:
    """The product's read-write connection to one episode's database file."""

    def __init__(self, path: Path, template: Path, seed: Iterable[Row]) -> None:
        shutil.copyfile(template, path)
        self.path = path
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        # An episode's data lives only as long as the episode: skip fsync (durability
        # across power loss is irrelevant; readers' WAL isolation is unaffected).
        self._conn.execute("PRAGMA synchronous=OFF")
        rows = list(seed)
        try:
            if rows:
                self._seed(rows)
        except BaseException:
            self._conn.close()
            remove_database(path)
            raise

    def _seed(self, rows: list[Row]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for row in rows:
                unknown = set(row) - _SEED_COLUMNS
                if unknown:
                    raise ValueError(
                        f"initial_state row has unknown columns {sorted(unknown)}; use {COLUMNS}"
                    )
                cols = list(row)
                marks = ", ".join("?" for _ in cols)
                conn.execute(
                    f"INSERT INTO encounters({', '.join(cols)}) VALUES ({marks})",
                    [row[c] for c in cols],
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def write(self, sub: Submission, fault: Fault) -> int:
        """Deliver one submission ``fault.deliveries`` times; return how many rows landed."""
        stored = 0
        for _ in range(fault.deliveries):
            stored += self._deliver(sub, fault)
        return stored

    def _deliver(self, sub: Submission, fault: Fault) -> int:
        if fault.store is StoreFault.DROP:
            return 0
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if fault.honors_key and sub.key:
                seen = conn.execute(
                    "SELECT 1 FROM encounters WHERE key = ? LIMIT 1", (sub.key,)
                ).fetchone()
                if seen is not None:
                    conn.execute("COMMIT")
                    return 0
            if fault.store is StoreFault.WIPE_PATIENT:
                conn.execute("DELETE FROM encounters WHERE patient_id = ?", (sub.patient_id,))
            note = "" if fault.store is StoreFault.EMPTY_NOTE else sub.note
            conn.execute(_INSERT, (sub.patient_id, sub.type, note, sub.source, sub.key))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return 1

    def rows(self) -> list[dict[str, JSONScalar]]:
        """Every encounter, in id order (the product's own readback)."""
        cur = self._conn.execute(
            "SELECT id, patient_id, type, note, source, key FROM encounters ORDER BY id"
        )
        return [dict(zip(COLUMNS, r)) for r in cur.fetchall()]

    def close(self) -> None:
        self._conn.close()


def remove_database(path: Path) -> None:
    """Delete a database file and its WAL side files; missing files are fine."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def seed_rows(initial_state: Mapping[str, tuple[Row, ...]]) -> tuple[Row, ...]:
    """The rows to seed; only the encounters table exists in MockMed."""
    unknown = set(initial_state) - {TABLE}
    if unknown:
        raise ValueError(
            f"MockMed has only the {TABLE!r} table; initial_state names {sorted(unknown)}"
        )
    return tuple(initial_state.get(TABLE, ()))
