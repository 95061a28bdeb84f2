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


@attrs.frozen
class StoreSchema:
    """One pack's database: its DDL, the columns a task may seed per table, and rows every
    episode starts with (e.g. the patient list). The anchor's is the single encounters table."""

    ddl: tuple[str, ...]
    columns: Mapping[str, tuple[str, ...]]
    base_rows: Mapping[str, tuple[Row, ...]] = attrs.field(factory=dict)

    @property
    def has_status(self) -> bool:
        return "status" in self.columns.get(TABLE, ())

    @property
    def has_patients(self) -> bool:
        return "patients" in self.columns


ANCHOR_SCHEMA: Final = StoreSchema(ddl=(SCHEMA,), columns={TABLE: COLUMNS})


def _insert_rows(
    conn: sqlite3.Connection, schema: StoreSchema, table: str, rows: Iterable[Row]
) -> None:
    known = schema.columns.get(table)
    if known is None:
        raise ValueError(
            f"this MockMed store has no table {table!r}; its tables are {sorted(schema.columns)}"
        )
    for row in rows:
        unknown = set(row) - set(known)
        if unknown:
            raise ValueError(
                f"initial_state row has unknown columns {sorted(unknown)}; use {known}"
            )
        cols = list(row)
        marks = ", ".join("?" for _ in cols)
        conn.execute(
            f"INSERT INTO {table}({', '.join(cols)}) VALUES ({marks})", [row[c] for c in cols]
        )


def build_template(path: Path, schema: StoreSchema = ANCHOR_SCHEMA) -> None:
    """Create a WAL-mode database with the schema (and its base rows), copied for every episode.

    Copying a ready file is cheaper than creating the schema per episode.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        for statement in schema.ddl:
            conn.execute(statement)
        for table, rows in schema.base_rows.items():
            _insert_rows(conn, schema, table, rows)
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
    status: str | None = None
    """Draft or submitted; stored only by a schema with a status column."""


class EncounterStore:
    """The product's read-write connection to one episode's database file."""

    def __init__(
        self,
        path: Path,
        template: Path,
        seed: Iterable[Row] | Mapping[str, Iterable[Row]],
        schema: StoreSchema = ANCHOR_SCHEMA,
    ) -> None:
        """``seed``: encounter rows, or a mapping of table -> rows (see ``seed_tables``)."""
        shutil.copyfile(template, path)
        self.path = path
        self.schema = schema
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        # An episode's data lives only as long as the episode: skip fsync (durability
        # across power loss is irrelevant; readers' WAL isolation is unaffected).
        self._conn.execute("PRAGMA synchronous=OFF")
        tables = (
            {str(t): list(r) for t, r in seed.items()}
            if isinstance(seed, Mapping)
            else {TABLE: list(seed)}
        )
        try:
            if any(tables.values()):
                self._seed(tables)
        except BaseException:
            self._conn.close()
            remove_database(path)
            raise

    def _seed(self, tables: Mapping[str, list[Row]]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for table, rows in tables.items():
                _insert_rows(conn, self.schema, table, rows)
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
            patient = self._target_patient(sub.patient_id, fault)
            if fault.store is StoreFault.WIPE_PATIENT:
                conn.execute("DELETE FROM encounters WHERE patient_id = ?", (patient,))
            note = "" if fault.store is StoreFault.EMPTY_NOTE else sub.note
            kind = fault.retype or sub.type
            if self.schema.has_status:
                cur = conn.execute(
                    "INSERT INTO encounters(patient_id, type, note, source, key, status) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (patient, kind, note, sub.source, sub.key, sub.status or "submitted"),
                )
            else:
                cur = conn.execute(_INSERT, (patient, kind, note, sub.source, sub.key))
            if fault.stray_billing:
                conn.execute(
                    "INSERT INTO billing(encounter_id, code, amount_cents) VALUES (?, ?, ?)",
                    (cur.lastrowid, "TRIAGE-FEE", 4200),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return 1

    def _target_patient(self, submitted: str, fault: Fault) -> str:
        """Which chart the write lands on: the submitted one unless the fault misroutes it."""
        if fault.retarget is not None:
            return fault.retarget
        if fault.homonym and self.schema.has_patients:
            # The lookup goes by display name and takes the newest chart holding it, so
            # every chart of that name resolves to the same one (aiming at the homonym
            # does not land on the referred patient either).
            row = self._conn.execute(
                "SELECT id FROM patients WHERE name = "
                "(SELECT name FROM patients WHERE id = ?) ORDER BY id DESC LIMIT 1",
                (submitted,),
            ).fetchone()
            if row is not None:
                return str(row[0])
        return submitted

    def knows_patient(self, patient_id: str) -> bool:
        """Whether the chart exists; a store without a patients table accepts any id."""
        if not self.schema.has_patients:
            return True
        row = self._conn.execute("SELECT 1 FROM patients WHERE id = ?", (patient_id,)).fetchone()
        return row is not None

    def patients(self) -> list[dict[str, JSONScalar]]:
        """The patient list the form offers (empty without a patients table)."""
        if not self.schema.has_patients:
            return []
        cols = self.schema.columns["patients"]
        cur = self._conn.execute(f"SELECT {', '.join(cols)} FROM patients ORDER BY id")
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def rows(self) -> list[dict[str, JSONScalar]]:
        """Every encounter, in id order (the product's own readback)."""
        cols = self.schema.columns[TABLE]
        cur = self._conn.execute(f"SELECT {', '.join(cols)} FROM encounters ORDER BY id")
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def close(self) -> None:
        self._conn.close()


def remove_database(path: Path) -> None:
    """Delete a database file and its WAL side files; missing files are fine."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def seed_tables(
    initial_state: Mapping[str, tuple[Row, ...]], schema: StoreSchema
) -> dict[str, tuple[Row, ...]]:
    """The rows to seed per table; a table the pack's schema lacks is an error."""
    unknown = set(initial_state) - set(schema.columns)
    if unknown:
        raise ValueError(
            f"this MockMed pack has tables {sorted(schema.columns)}; initial_state names "
            f"{sorted(unknown)}"
        )
    return {t: tuple(rows) for t, rows in initial_state.items()}
