"""Episode databases reused across episodes, each reset to the template's exact state.

A database per episode cloned with ``CREATE DATABASE ... TEMPLATE`` costs the server
~20 ms of CPU per episode (measured, docs/performance.md section 9): the clone and the
drop, two backends started in a database no backend has warmed, and their first catalog
reads. ``DatabasePool`` keeps each clone, with a product connection and an oracle
connection on it, and between episodes puts it back to the template's state instead:

1. what ``DISCARD ALL`` does, on the product connection (temp tables, settings,
   advisory locks, prepared statements, LISTEN: nothing of a session outlives its
   episode);
2. every other session on the database is terminated (anything the product opened);
3. a fingerprint of the database's schema objects (schemas, tables, columns, defaults,
   constraints, triggers, functions, rules, policies, extensions, enum labels, grants)
   is compared with the template's: a product that changed any of them gets its
   database dropped, and the next episode a fresh clone;
4. in one transaction: ``TRUNCATE`` of every table, the template's rows copied back
   (``COPY ... FORMAT binary``, taken from the first clone), and every sequence set to
   the template's value.

A reset that fails in any way drops the database instead. Names stay
``eb_<run id>_e<N>``, so a killed run's pool is dropped by the next run's start
(``effectbench.postgres.databases.drop_orphans``), exactly like single-use clones.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

import anyio
import attrs
import structlog

from effectbench.postgres.databases import PgRun
from effectbench.postgres.oracle import connect as oracle_connect

log = structlog.get_logger("effectbench.postgres.pool")

STRAY_EXIT_S: Final = 5.0
"""How long a reset waits for terminated sessions to exit before giving the database up."""

_USER_NS: Final = (
    "n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') "
    "AND n.nspname NOT LIKE 'pg\\_temp\\_%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%'"
)

FINGERPRINT: Final = """
SELECT md5(coalesce(string_agg(item, E'\\n' ORDER BY item), '')) FROM (
 SELECT concat_ws(' ', 'n', n.nspname, n.nspacl) FROM pg_namespace n
   WHERE (n.oid >= 16384 OR n.nspname = 'public')
     AND n.nspname NOT LIKE 'pg\\_temp\\_%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%'
 UNION ALL SELECT concat_ws(' ', 'c', c.relnamespace, c.relname, c.relkind, c.relacl,
   c.relrowsecurity, c.relpersistence) FROM pg_class c
   WHERE c.oid >= 16384 AND c.relpersistence <> 't'
 UNION ALL SELECT concat_ws(' ', 'a', a.attrelid, a.attnum, a.attname, a.atttypid, a.atttypmod,
   a.attnotnull, a.attgenerated, a.attidentity) FROM pg_attribute a
   WHERE a.attrelid >= 16384 AND a.attnum > 0 AND NOT a.attisdropped
   AND NOT EXISTS (SELECT FROM pg_class t WHERE t.oid = a.attrelid AND t.relpersistence = 't')
 UNION ALL SELECT concat_ws(' ', 'd', d.adrelid, d.adnum, md5(d.adbin::text)) FROM pg_attrdef d
   WHERE d.oid >= 16384
 UNION ALL SELECT concat_ws(' ', 'k', k.conrelid, k.conname, k.contype, k.conkey, k.confrelid,
   md5(k.conbin::text)) FROM pg_constraint k WHERE k.oid >= 16384
 UNION ALL SELECT concat_ws(' ', 't', t.tgrelid, t.tgname, t.tgfoid, t.tgenabled, t.tgtype)
   FROM pg_trigger t WHERE t.oid >= 16384 AND NOT t.tgisinternal
 UNION ALL SELECT concat_ws(' ', 'p', p.pronamespace, p.proname, md5(p.prosrc), p.proacl)
   FROM pg_proc p WHERE p.oid >= 16384
 UNION ALL SELECT concat_ws(' ', 'r', r.ev_class, r.rulename, md5(r.ev_action::text))
   FROM pg_rewrite r WHERE r.oid >= 16384
 UNION ALL SELECT concat_ws(' ', 'y', y.polrelid, y.polname, md5(y.polqual::text))
   FROM pg_policy y
 UNION ALL SELECT concat_ws(' ', 'e', e.extname, e.extversion) FROM pg_extension e
 UNION ALL SELECT concat_ws(' ', 'E', e.enumtypid, e.enumsortorder, e.enumlabel) FROM pg_enum e
   WHERE e.oid >= 16384
 UNION ALL SELECT concat_ws(' ', 'D', a.defaclrole, a.defaclnamespace, a.defaclobjtype,
   a.defaclacl) FROM pg_default_acl a
) AS x(item)
"""
"""One md5 over the catalog rows of every object created after initdb (OID >= 16384,
``FirstNormalObjectId``) and the ``public`` schema's grants; OIDs are the same in every
clone of one template. Temporary objects are left out (``DISCARD ALL`` removes them)."""

_TABLES: Final = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND {_USER_NS}
ORDER BY 1
"""
_SEQUENCES: Final = f"""
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'S' AND {_USER_NS}
ORDER BY 1
"""
_SESSION_RESET: Final = (
    "SET SESSION AUTHORIZATION DEFAULT; RESET ALL; DEALLOCATE ALL; CLOSE ALL; UNLISTEN *; "
    "SELECT pg_advisory_unlock_all(); DISCARD PLANS; DISCARD SEQUENCES; DISCARD TEMP"
)
"""``DISCARD ALL`` statement by statement: unlike it, these may share one round trip."""
_STILL_THERE: Final = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid = ANY(%s)"
)


def _check(keep: tuple[int, ...]) -> str:
    """One statement: terminate every other session on the database (their pids), and
    the fingerprint. Literal pids: it shares a round trip with ``_SESSION_RESET``; CASE
    because SQL does not promise to evaluate AND's operands in order."""
    pids = ", ".join(str(int(p)) for p in keep)
    return (
        "SELECT (SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity WHERE CASE "
        f"WHEN datname = current_database() AND pid NOT IN ({pids}) "
        f"THEN pg_terminate_backend(pid) ELSE false END), ({FINGERPRINT})"
    )


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@attrs.frozen
class Baseline:
    """The template's state as a reset restores it."""

    fingerprint: str
    tables: tuple[str, ...]
    rows: tuple[tuple[str, bytes], ...]
    """(table, its rows as COPY binary) for every table the template filled."""
    sequences: tuple[tuple[str, int, bool], ...]
    """(sequence, last_value, is_called)."""

    @property
    def restore(self) -> str:
        """Every table emptied and every sequence set back, as one multi-statement query
        (one implicit transaction); the template's rows are copied in after it."""
        parts = [f"TRUNCATE {', '.join(self.tables)}"] if self.tables else []
        if self.sequences:
            calls = ", ".join(
                f"setval({_literal(s)}, {int(v)}, {'true' if c else 'false'})"
                for s, v, c in self.sequences
            )
            parts.append(f"SELECT {calls}")
        return "; ".join(parts)


@attrs.frozen
class PooledDatabase:
    """One leased database: the product's connection (the run's admin role, autocommit)
    and the oracle's (the SELECT-only role), both kept open across episodes."""

    name: str
    dsn: str
    product: Any
    oracle: Any


async def _fingerprint(conn: Any) -> str:
    cur = await conn.execute(FINGERPRINT)
    row = await cur.fetchone()
    return str(row[0])


async def capture(conn: Any) -> Baseline:
    """What ``reset`` puts back, read from a pristine clone of the template."""
    tables = tuple(str(r[0]) for r in await (await conn.execute(_TABLES)).fetchall())
    rows: list[tuple[str, bytes]] = []
    async with conn.transaction():
        cur = conn.cursor()
        for table in tables:
            data = bytearray()
            async with cur.copy(f"COPY {table} TO STDOUT (FORMAT binary)") as copy:
                async for chunk in copy:
                    data += chunk
            count = await (await conn.execute(f"SELECT count(*) FROM {table}")).fetchone()
            if count is not None and int(count[0]) > 0:
                rows.append((table, bytes(data)))
        sequences = []
        for (seq,) in await (await conn.execute(_SEQUENCES)).fetchall():
            row = await (await conn.execute(f"SELECT last_value, is_called FROM {seq}")).fetchone()
            assert row is not None
            sequences.append((str(seq), int(row[0]), bool(row[1])))
    return Baseline(await _fingerprint(conn), tables, tuple(rows), tuple(sequences))


async def _wait_gone(conn: Any, pids: list[int]) -> None:
    """Wait (bounded) until terminated sessions have exited: none writes after a reset."""
    with anyio.fail_after(STRAY_EXIT_S):
        while True:
            row = await (await conn.execute(_STILL_THERE, (pids,))).fetchone()
            if row is not None and int(row[0]) == 0:
                return
            await anyio.sleep(0.01)


async def reset(db: PooledDatabase, baseline: Baseline) -> bool:
    """Put ``db`` back to the template's state; False when it cannot be (drop it).

    Two round trips when nothing is amiss: the session reset with the check, then the
    restore."""
    import psycopg

    product, oracle = db.product, db.oracle
    idle = psycopg.pq.TransactionStatus.IDLE
    for conn in (product, oracle):
        if conn.closed or conn.info.transaction_status != idle:
            return False
    keep = (product.info.backend_pid, oracle.info.backend_pid)
    cur = await product.execute(f"{_check(keep)}; {_SESSION_RESET}")
    row = await cur.fetchone()  # the first statement's result
    assert row is not None
    strays, fingerprint = [int(p) for p in row[0]], str(row[1])
    if strays:
        await _wait_gone(product, strays)
    if fingerprint != baseline.fingerprint:
        log.info("pg.pool_schema_changed", database=db.name)
        return False
    if not baseline.rows:
        if baseline.tables or baseline.sequences:
            await product.execute(baseline.restore)
        return True
    async with product.transaction():
        await product.execute(baseline.restore)
        copier = product.cursor()
        for table, data in baseline.rows:
            async with copier.copy(f"COPY {table} FROM STDIN (FORMAT binary)") as copy:
                await copy.write(data)
    return True


class DatabasePool:
    """Leases databases of one ``PgRun``: a free one reset after its last episode, else
    a new clone of the template. ``give_back`` resets it or drops it."""

    def __init__(self, run: PgRun) -> None:
        self.run = run
        self._free: list[PooledDatabase] = []
        self._leased: dict[str, PooledDatabase] = {}
        self._baseline: Baseline | None = None
        self._first = anyio.Lock()
        self._closed = False

    @property
    def size(self) -> int:
        """Databases held (free and leased)."""
        return len(self._free) + len(self._leased)

    async def lease(self) -> PooledDatabase:
        if self._closed:
            raise RuntimeError("DatabasePool.lease() after close()")
        db = self._free.pop() if self._free else await self._new()
        self._leased[db.name] = db
        return db

    async def _new(self) -> PooledDatabase:
        import psycopg

        name = await self.run.clone()
        dsn = self.run.dsn(name)
        product: Any = None
        oracle: Any = None
        try:
            # prepare_threshold=None: each reset deallocates every prepared statement.
            product = await psycopg.AsyncConnection.connect(
                dsn, autocommit=True, prepare_threshold=None
            )
            oracle = await oracle_connect(self.run.oracle_dsn(name))
            if self._baseline is None:
                async with self._first:
                    if self._baseline is None:
                        self._baseline = await capture(product)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _close(product, oracle)
                await self.run.drop(name)
            raise
        return PooledDatabase(name, dsn, product, oracle)

    async def give_back(self, db: PooledDatabase) -> None:
        """Reset ``db`` for the next episode, or drop it when it cannot be reset."""
        if self._leased.pop(db.name, None) is None:
            return
        ok = False
        if not self._closed and self._baseline is not None:
            try:
                ok = await reset(db, self._baseline)
            except Exception as exc:  # noqa: BLE001 - any failure: a fresh clone next time
                log.info("pg.pool_reset_failed", database=db.name, error=str(exc).strip())
        if ok and not self._closed:
            self._free.append(db)
            return
        await _close(db.product, db.oracle)
        self.run.release(db.name)

    async def close(self) -> None:
        """Close every connection; the run's close() drops the databases."""
        self._closed = True
        held = [*self._free, *self._leased.values()]
        self._free, self._leased = [], {}
        for db in held:
            await _close(db.product, db.oracle)


async def _close(*conns: Any) -> None:
    for conn in conns:
        if conn is not None:
            with contextlib.suppress(Exception):  # being discarded with its database
                await conn.close()
