"""Reused episode databases on a real server: each lease starts from the template's exact
state, whatever the previous episode did to the data, the session or the schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import psycopg
import pytest

from effectbench.postgres.databases import PgRun
from effectbench.postgres.oracle import PostgresOracle
from effectbench.postgres.pool import DatabasePool

pytestmark = pytest.mark.anyio

DEADLINE_S = 20.0


async def _build(conn: Any) -> None:
    await conn.execute("CREATE TABLE t(id serial PRIMARY KEY, v text)")
    await conn.execute("INSERT INTO t(v) VALUES ('from the template'), ('second')")
    await conn.execute("CREATE TABLE empty(x int)")
    await conn.execute("CREATE SEQUENCE loose START 40")


@pytest.fixture
async def pool(pg_dsn: str) -> AsyncIterator[DatabasePool]:
    run = PgRun(pg_dsn)
    await run.open(_build)
    p = DatabasePool(run)
    try:
        yield p
    finally:
        await p.close()
        await run.close()


async def _state(conn: Any) -> tuple[object, ...]:
    rows = await (await conn.execute("SELECT id, v FROM t ORDER BY id")).fetchall()
    empty = await (await conn.execute("SELECT count(*) FROM empty")).fetchone()
    serial = await (await conn.execute("SELECT nextval('t_id_seq')")).fetchone()
    loose = await (await conn.execute("SELECT nextval('loose')")).fetchone()
    return (rows, empty, serial, loose)


async def _exists(dsn: str, name: str) -> bool:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        return await cur.fetchone() is not None


async def test_a_reused_database_comes_back_exactly_as_the_template(pool: DatabasePool) -> None:
    db = await pool.lease()
    async with await psycopg.AsyncConnection.connect(db.dsn, autocommit=True) as fresh:
        expected = await _state(fresh)
    await pool.give_back(db)  # _state moved both sequences: the reset puts them back
    db = await pool.lease()
    conn = db.product
    await conn.execute("INSERT INTO t(v) VALUES ('episode 1')")
    await conn.execute("UPDATE t SET v = 'changed' WHERE id = 1")
    await conn.execute("DELETE FROM t WHERE id = 2")
    await conn.execute("INSERT INTO empty VALUES (1)")
    await conn.execute("SELECT nextval('loose')")
    name = db.name
    await pool.give_back(db)
    again = await pool.lease()
    assert again.name == name and pool.size == 1  # the same database, not a new clone
    assert await _state(again.product) == expected
    await pool.give_back(again)


async def test_the_oracle_reads_through_the_pooled_connection_and_leaves_it_open(
    pool: DatabasePool,
) -> None:
    db = await pool.lease()
    oracle = PostgresOracle(pool.run.oracle_dsn(db.name), connection=db.oracle)
    snap = await oracle.read()
    assert [r["v"] for r in snap.rows("t")] == ["from the template", "second"]
    await oracle.close()
    assert not db.oracle.closed
    await pool.give_back(db)
    assert (await pool.lease()).oracle is db.oracle


async def test_session_state_does_not_outlive_an_episode(pool: DatabasePool) -> None:
    db = await pool.lease()
    conn = db.product
    await conn.execute("CREATE TEMP TABLE t(id int, v text)")  # shadows public.t
    await conn.execute("INSERT INTO t VALUES (99, 'in a temp table')")
    await conn.execute("SET search_path = pg_temp, public")
    await conn.execute("SELECT pg_advisory_lock(7)")
    await pool.give_back(db)
    again = await pool.lease()
    assert again.name == db.name
    cur = await again.product.execute("SELECT v FROM t ORDER BY id")
    assert [r[0] for r in await cur.fetchall()] == ["from the template", "second"]
    cur = await again.product.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    )
    assert await cur.fetchone() == (0,)
    cur = await again.product.execute("SHOW search_path")
    assert await cur.fetchone() == ('"$user", public',)


async def test_a_session_the_product_left_open_is_ended_before_the_next_episode(
    pool: DatabasePool,
) -> None:
    db = await pool.lease()
    stray = await psycopg.AsyncConnection.connect(db.dsn, autocommit=True)
    await stray.execute("INSERT INTO t(v) VALUES ('stray')")
    await pool.give_back(db)
    with pytest.raises(psycopg.OperationalError):
        await stray.execute("INSERT INTO t(v) VALUES ('after the reset')")
    await stray.close()
    again = await pool.lease()
    assert again.name == db.name
    cur = await again.product.execute("SELECT v FROM t ORDER BY id")
    assert [r[0] for r in await cur.fetchall()] == ["from the template", "second"]


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE extra(x int)",
        "ALTER TABLE t ADD COLUMN w int",
        "DROP TABLE empty",
        "CREATE INDEX ON t(v)",
        "ALTER TABLE t ALTER COLUMN v SET DEFAULT 'x'",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "GRANT ALL ON SCHEMA public TO PUBLIC",
    ],
)
async def test_a_changed_schema_gets_the_next_episode_a_fresh_clone(
    pool: DatabasePool, pg_dsn: str, ddl: str
) -> None:
    db = await pool.lease()
    await db.product.execute(ddl)
    await pool.give_back(db)
    fresh = await pool.lease()
    assert fresh.name != db.name and pool.size == 1
    with anyio.fail_after(DEADLINE_S):  # dropped in the background once its sessions exit
        while await _exists(pg_dsn, db.name):
            await anyio.sleep(0.01)
    assert db.product.closed  # the changed database's connections are closed
    cur = await fresh.product.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 't'"
    )
    assert await cur.fetchone() == (2,)


async def test_a_connection_left_inside_a_transaction_gets_a_fresh_clone(
    pool: DatabasePool,
) -> None:
    db = await pool.lease()
    await db.product.execute("BEGIN")
    await db.product.execute("INSERT INTO t(v) VALUES ('uncommitted')")
    await pool.give_back(db)
    fresh = await pool.lease()
    assert fresh.name != db.name and db.product.closed


async def test_closing_the_run_drops_every_pooled_database(pg_dsn: str) -> None:
    run = PgRun(pg_dsn)
    await run.open(_build)
    pool = DatabasePool(run)
    a, b = await pool.lease(), await pool.lease()
    await pool.give_back(a)
    await pool.close()
    await run.close()
    assert not await _exists(pg_dsn, a.name) and not await _exists(pg_dsn, b.name)
    assert a.product.closed and b.oracle.closed


async def test_a_request_after_teardown_never_reaches_the_pooled_connection(pg_dsn: str) -> None:
    """The app's request that arrives late (its client gone) must not write into the
    database the next episode gets: the closed store refuses it, the connection stays."""
    from effectbench_mockmed.faults import FAULTS
    from effectbench_mockmed.pg_provider import PG_ANCHOR_SCHEMA
    from effectbench_mockmed.pg_store import PgEncounterStore, StoreClosed
    from effectbench_mockmed.store import Submission

    async def build(conn: Any) -> None:
        await conn.execute(PG_ANCHOR_SCHEMA.ddl[0])

    run = PgRun(pg_dsn)
    await run.open(build)
    mm = DatabasePool(run)
    try:
        db = await mm.lease()
        store = await PgEncounterStore.open(
            db.dsn, db.name, {}, PG_ANCHOR_SCHEMA, FAULTS["ok"], conn=db.product
        )
        sub = Submission("p1", "Triage", "late", None, "form", None)
        assert await store.write(sub, FAULTS["ok"]) == 1
        await store.close()
        with pytest.raises(StoreClosed):
            await store.write(sub, FAULTS["ok"])
        assert not db.product.closed
        cur = await db.product.execute("SELECT count(*) FROM encounters")
        assert await cur.fetchone() == (1,)  # only the write made before teardown
    finally:
        await mm.close()
        await run.close()
