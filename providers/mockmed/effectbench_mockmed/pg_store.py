"""The MockMed system of record on PostgreSQL: one database per episode, owned by the product.

``PgEncounterStore`` offers the app what ``EncounterStore`` (SQLite) does, as coroutines,
and injects the same faults the same way: a delivery is one READ COMMITTED transaction
holding the same statements in the same order. It adds two faults that only a real
database with concurrent sessions shows (``PgFault.race``):

- ``LOST_UPDATE`` (C4): the product opens its edit transaction when the chart is opened
  (here, when the episode opens) and reads the patient's encounters; a concurrent
  writer (ward B) then amends one of them and commits; on save the product writes its
  stale copy back over it. At READ COMMITTED PostgreSQL lets that UPDATE through, so
  ward B's amendment is lost (at REPEATABLE READ it would fail to serialize).
- ``SPLIT_SAVE`` (C1): the product saves in two autocommitted statements: the encounter
  row, then its note. Between them a concurrent sync job locks the new row; the note
  statement (``FOR UPDATE NOWAIT``) fails, the product logs it and answers "Saved".

Both are sequenced by an explicit handshake (events set after each commit), never by
sleeping, so every trial is the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

import anyio
import attrs
import structlog

from effectbench.model import JSONScalar, Row
from effectbench_mockmed.faults import FAULTS, Fault, StoreFault
from effectbench_mockmed.store import TABLE, StoreSchema, Submission

log = structlog.get_logger("effectbench.mockmed.pg")

PG_SCHEMA_DDL: Final = (
    "CREATE TABLE encounters(id bigserial PRIMARY KEY, patient_id text, type text, "
    "note text, source text, key text)"
)
"""The anchor's table on PostgreSQL (``bigserial`` assigns ids from 1, as AUTOINCREMENT does)."""

AMENDED_NOTE: Final = "chest pain, assessed by ward B; ECG normal"
"""What ward B writes over its own row while the product's edit transaction is open."""


class Race(StrEnum):
    LOST_UPDATE = "lost_update"
    SPLIT_SAVE = "split_save"


@attrs.frozen
class PgFault(Fault):
    """A MockMed fault, plus a race with a concurrent session (PostgreSQL only)."""

    race: Race | None = None


PG_FAULTS: Final[Mapping[str, Fault]] = MappingProxyType(
    {
        **FAULTS,
        "lost_update": PgFault(
            1, StoreFault.NONE, False, True, 200, "Saved", race=Race.LOST_UPDATE
        ),
        "split_save": PgFault(1, StoreFault.NONE, False, True, 200, "Saved", race=Race.SPLIT_SAVE),
    }
)
"""The anchor's nine modes unchanged, plus the two races."""


def _race(fault: Fault) -> Race | None:
    return fault.race if isinstance(fault, PgFault) else None


def _cols(row: Row, known: tuple[str, ...], table: str) -> list[str]:
    unknown = set(row) - set(known)
    if unknown:
        raise ValueError(
            f"initial_state row of {table!r} has unknown columns {sorted(unknown)}; use {known}"
        )
    return list(row)


async def insert_rows(conn: Any, schema: StoreSchema, table: str, rows: Iterable[Row]) -> None:
    """Insert seed rows (the same checks as the SQLite store)."""
    known = schema.columns.get(table)
    if known is None:
        raise ValueError(
            f"this MockMed store has no table {table!r}; its tables are {sorted(schema.columns)}"
        )
    for row in rows:
        cols = _cols(row, known, table)
        marks = ", ".join("%s" for _ in cols)
        await conn.execute(
            f"INSERT INTO {table}({', '.join(cols)}) VALUES ({marks})", [row[c] for c in cols]
        )


class StoreClosed(Exception):
    """A request reached the store after its episode ended."""


class PgEncounterStore:
    """The product's read-write connection to one episode's database."""

    def __init__(
        self, conn: Any, schema: StoreSchema, database: str, dsn: str, *, owned: bool = True
    ) -> None:
        self._conn = conn
        self._owned = owned
        """False: a pool's connection, left open by ``close``."""
        self._dsn = dsn
        self.schema = schema
        self.database = database
        self._edit: Any = None
        """LOST_UPDATE: the edit session's connection, inside its open transaction."""
        self._stale: list[tuple[Any, ...]] = []
        self._lock = anyio.Lock()
        self._closed = False

    @classmethod
    async def open(
        cls,
        dsn: str,
        database: str,
        seed: Mapping[str, Iterable[Row]],
        schema: StoreSchema,
        fault: Fault,
        conn: Any = None,
    ) -> PgEncounterStore:
        """``conn``: an open autocommit connection to reuse (a pool's), else a new one."""
        import psycopg

        owned = conn is None
        if conn is None:
            conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        store = cls(conn, schema, database, dsn, owned=owned)
        try:
            if any(list(rows) for rows in seed.values()):
                async with conn.transaction():
                    for table, rows in seed.items():
                        await insert_rows(conn, schema, table, rows)
            if _race(fault) is Race.LOST_UPDATE:
                await store._open_edit(dsn)
        except BaseException:
            await store.close()
            raise
        return store

    async def _open_edit(self, dsn: str) -> None:
        """Open the product's edit transaction, read the chart, then let ward B commit an
        amendment to it (the handshake: B starts only once the read is done)."""
        import psycopg

        edit = await psycopg.AsyncConnection.connect(dsn)  # not autocommit: BEGIN on first use
        await edit.set_isolation_level(psycopg.IsolationLevel.READ_COMMITTED)
        self._edit = edit
        read_done, committed = anyio.Event(), anyio.Event()

        async def ward_b() -> None:
            await read_done.wait()
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as other:
                await other.execute(
                    "UPDATE encounters SET note = %s WHERE patient_id = 'p1' AND source = 'ward-b'",
                    (AMENDED_NOTE,),
                )
            committed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(ward_b)
            cur = await edit.execute(
                "SELECT id, note FROM encounters WHERE patient_id = 'p1' ORDER BY id"
            )
            self._stale = list(await cur.fetchall())
            read_done.set()
            await committed.wait()

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """The connection, once the request before is done; never after ``close``: a
        pooled connection then belongs to the next episode's database state."""
        async with self._lock:
            if self._closed:
                raise StoreClosed("the episode is over; its store is closed")
            yield

    async def write(self, sub: Submission, fault: Fault) -> int:
        """Deliver one submission ``fault.deliveries`` times; return how many rows landed."""
        async with self._turn():  # one connection: the app's requests take turns on it
            stored = 0
            for _ in range(fault.deliveries):
                stored += await self._deliver(sub, fault)
            return stored

    async def _deliver(self, sub: Submission, fault: Fault) -> int:
        if fault.store is StoreFault.DROP:
            return 0
        race = _race(fault)
        if race is Race.SPLIT_SAVE:
            return await self._split_save(sub)
        if race is Race.LOST_UPDATE and self._edit is not None:
            return await self._save_stale(sub)
        conn = self._conn
        async with conn.transaction():
            if fault.honors_key and sub.key:
                cur = await conn.execute(
                    "SELECT 1 FROM encounters WHERE key = %s LIMIT 1", (sub.key,)
                )
                if await cur.fetchone() is not None:
                    return 0
            patient = await self._target_patient(sub.patient_id, fault)
            if fault.store is StoreFault.WIPE_PATIENT:
                await conn.execute("DELETE FROM encounters WHERE patient_id = %s", (patient,))
            note = "" if fault.store is StoreFault.EMPTY_NOTE else sub.note
            kind = fault.retype or sub.type
            if self.schema.has_status:
                cur = await conn.execute(
                    "INSERT INTO encounters(patient_id, type, note, source, key, status) "
                    "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                    (patient, kind, note, sub.source, sub.key, sub.status or "submitted"),
                )
            else:
                cur = await conn.execute(
                    "INSERT INTO encounters(patient_id, type, note, source, key) "
                    "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                    (patient, kind, note, sub.source, sub.key),
                )
            row = await cur.fetchone()
            if fault.stray_billing and row is not None:
                await conn.execute(
                    "INSERT INTO billing(encounter_id, code, amount_cents) VALUES (%s, %s, %s)",
                    (row[0], "TRIAGE-FEE", 4200),
                )
        return 1

    async def _save_stale(self, sub: Submission) -> int:
        """Write the chart as read when it was opened, then the new encounter; commit."""
        edit, self._edit = self._edit, None
        try:
            for row_id, note in self._stale:
                await edit.execute("UPDATE encounters SET note = %s WHERE id = %s", (note, row_id))
            await edit.execute(
                "INSERT INTO encounters(patient_id, type, note, source, key) "
                "VALUES (%s, %s, %s, %s, %s)",
                (sub.patient_id, sub.type, sub.note, sub.source, sub.key),
            )
            await edit.commit()
        finally:
            await edit.close()
        return 1

    async def _split_save(self, sub: Submission) -> int:
        """Two autocommitted statements; a concurrent session locks the row between them."""
        import psycopg

        conn = self._conn
        cur = await conn.execute(
            "INSERT INTO encounters(patient_id, type, note, source, key) "
            "VALUES (%s, %s, '', %s, %s) RETURNING id",
            (sub.patient_id, sub.type, sub.source, sub.key),
        )
        row = await cur.fetchone()
        assert row is not None
        async with await psycopg.AsyncConnection.connect(self._dsn) as sync_job:
            # The sync job picks up the new encounter and holds it while it works.
            await sync_job.execute("SELECT 1 FROM encounters WHERE id = %s FOR UPDATE", (row[0],))
            try:
                await conn.execute(
                    "UPDATE encounters SET note = %s WHERE id = "
                    "(SELECT id FROM encounters WHERE id = %s FOR UPDATE NOWAIT)",
                    (sub.note, row[0]),
                )
            except psycopg.errors.LockNotAvailable as exc:
                log.warning("mockmed.note_not_saved", encounter=row[0], error=str(exc).strip())
            await sync_job.rollback()
        return 1

    async def _target_patient(self, submitted: str, fault: Fault) -> str:
        if fault.retarget is not None:
            return fault.retarget
        if fault.homonym and self.schema.has_patients:
            cur = await self._conn.execute(
                "SELECT id FROM patients WHERE name = "
                "(SELECT name FROM patients WHERE id = %s) ORDER BY id DESC LIMIT 1",
                (submitted,),
            )
            row = await cur.fetchone()
            if row is not None:
                return str(row[0])
        return submitted

    async def knows_patient(self, patient_id: str) -> bool:
        if not self.schema.has_patients:
            return True
        async with self._turn():
            cur = await self._conn.execute("SELECT 1 FROM patients WHERE id = %s", (patient_id,))
            return await cur.fetchone() is not None

    async def patients(self) -> list[dict[str, JSONScalar]]:
        if not self.schema.has_patients:
            return []
        cols = self.schema.columns["patients"]
        async with self._turn():
            cur = await self._conn.execute(f"SELECT {', '.join(cols)} FROM patients ORDER BY id")
            return [dict(zip(cols, r)) for r in await cur.fetchall()]

    async def rows(self) -> list[dict[str, JSONScalar]]:
        """Every encounter, in id order (the product's own readback)."""
        cols = self.schema.columns[TABLE]
        async with self._turn():
            cur = await self._conn.execute(f"SELECT {', '.join(cols)} FROM encounters ORDER BY id")
            return [dict(zip(cols, r)) for r in await cur.fetchall()]

    async def close(self) -> None:
        async with self._lock:  # a request still on the connection finishes first
            self._closed = True
        for conn in (self._edit, self._conn if self._owned else None):
            if conn is not None:
                with contextlib.suppress(Exception):  # teardown: the database is dropped next
                    await conn.close()
        self._edit = None
