"""The PostgreSQL oracle against a real server: types, order, consistency, privileges."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from effectbench.model import DiffEffect, Insert
from effectbench.oracles.digest import DIGEST_FIELD, SnapshotScope
from effectbench.postgres import oracle as pg_oracle
from effectbench.postgres.databases import PgRun
from effectbench.postgres.oracle import PostgresOracle

pytestmark = pytest.mark.anyio

TYPES_DDL = """
CREATE TABLE typed(
  id int PRIMARY KEY, b boolean, i2 smallint, i8 bigint, f8 double precision, f4 real,
  n numeric(12, 4), t text, ts timestamptz, tsn timestamp, d date, tm time, iv interval,
  by bytea, j json, jb jsonb, arr int[], tarr text[], u uuid
)
"""
TYPES_ROW = """
INSERT INTO typed VALUES (
  1, true, -3, 9007199254740993, 0.1, 'NaN', 1.5000, 'héllo', '2026-01-02 03:04:05.5+02',
  '2026-01-02 03:04:05', '2026-01-02', '13:14:15', '1 day 2 hours', '\\x00ff10',
  '{"b": 1, "a": [1, 2]}', '{"b": 1, "a": [1, 2]}', '{3,1,NULL}', '{"x,y",z}',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'
)
"""


async def _build(conn: Any) -> None:
    await conn.execute(TYPES_DDL)
    await conn.execute("CREATE TABLE bag(x int, y text)")  # no primary key
    await conn.execute("CREATE SCHEMA other")
    await conn.execute("CREATE TABLE other.side(id int PRIMARY KEY)")


@pytest.fixture
async def run(pg_dsn: str) -> AsyncIterator[PgRun]:
    r = PgRun(pg_dsn)
    await r.open(_build, schemas=("public", "other"))
    try:
        yield r
    finally:
        await r.close()


async def test_every_type_maps_to_a_lossless_json_scalar(run: PgRun) -> None:
    db = await run.clone()
    async with await psycopg.AsyncConnection.connect(run.dsn(db), autocommit=True) as conn:
        await conn.execute(TYPES_ROW)
    oracle = PostgresOracle(run.oracle_dsn(db))
    snap = await oracle.read()
    await oracle.close()
    assert snap.readable, snap.error
    (row,) = snap.rows("typed")
    assert row == {
        "id": 1,
        "b": True,
        "i2": -3,
        "i8": 9007199254740993,  # beyond a double's exact range: still exact
        "f8": 0.1,
        "f4": "NaN",
        "n": "1.5000",  # numeric as the server prints it, scale kept
        "t": "héllo",
        "ts": "2026-01-02T01:04:05.5Z",  # timestamptz in UTC
        "tsn": "2026-01-02T03:04:05",
        "d": "2026-01-02",
        "tm": "13:14:15",
        "iv": "P1DT2H",
        "by": base64.b64encode(b"\x00\xff\x10").decode(),
        "j": '{"b": 1, "a": [1, 2]}',  # json: the text as stored
        "jb": '{"a": [1, 2], "b": 1}',  # jsonb: as the server normalised it
        "arr": "[3,1,null]",
        "tarr": '["x,y","z"]',
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    }
    assert set(snap.tables) == {"typed", "bag", "other.side"}


async def test_rows_come_in_a_stable_order_with_or_without_a_primary_key(run: PgRun) -> None:
    db = await run.clone()
    async with await psycopg.AsyncConnection.connect(run.dsn(db), autocommit=True) as conn:
        for x, y in ((2, "b"), (1, "z"), (2, "a"), (10, "c")):
            await conn.execute("INSERT INTO bag VALUES (%s, %s)", (x, y))
        await conn.execute("INSERT INTO other.side VALUES (3), (1), (2)")
        await conn.execute("UPDATE bag SET y = 'a' WHERE y = 'a'")  # moves the row physically
    oracle = PostgresOracle(run.oracle_dsn(db))
    first, second = await oracle.read(), await oracle.read()
    await oracle.close()
    assert first == second
    assert [r["id"] for r in first.rows("other.side")] == [1, 2, 3]
    # no primary key: by the whole row's text, byte order
    assert [(r["x"], r["y"]) for r in first.rows("bag")] == [
        (1, "z"),
        (10, "c"),
        (2, "a"),
        (2, "b"),
    ]


async def test_a_declared_schema_list_limits_what_is_read(run: PgRun) -> None:
    db = await run.clone()
    oracle = PostgresOracle(run.oracle_dsn(db), schemas=["other"])
    snap = await oracle.read()
    await oracle.close()
    assert set(snap.tables) == {"other.side"}


async def test_one_snapshot_is_a_consistent_cut_while_the_product_writes(
    run: PgRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer commits to ``typed`` after the oracle read ``bag`` and before it reads
    ``typed``: under REPEATABLE READ the snapshot still holds the state at its start."""
    db = await run.clone()
    writer = await psycopg.AsyncConnection.connect(run.dsn(db), autocommit=True)
    real_execute = psycopg.AsyncConnection.execute
    done: list[str] = []

    async def execute(self: Any, query: Any, *args: Any, **kw: Any) -> Any:
        cur = await real_execute(self, query, *args, **kw)
        if self is not writer and '"bag"' in str(query) and not done:
            done.append("bag")
            await writer.execute(TYPES_ROW)  # committed while the oracle's transaction is open
        return cur

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", execute)
    oracle = PostgresOracle(run.oracle_dsn(db))
    snap = await oracle.read()
    assert done == ["bag"]
    assert snap.readable and snap.rows("typed") == ()
    monkeypatch.undo()
    assert len((await oracle.read()).rows("typed")) == 1  # the next read sees the commit
    await oracle.close()
    await writer.close()


async def test_the_oracle_role_can_select_but_never_write(run: PgRun) -> None:
    db = await run.clone()
    async with await psycopg.AsyncConnection.connect(run.oracle_dsn(db), autocommit=True) as conn:
        await conn.execute("SELECT count(*) FROM typed")
        # even with the session's read-only default turned off, the role has no write grant
        await conn.execute("SET default_transaction_read_only = off")
        for statement in (
            "INSERT INTO typed(id) VALUES (7)",
            "UPDATE bag SET x = 1",
            "DELETE FROM other.side",
            "CREATE TABLE sneaky(x int)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute(statement)


async def test_an_unreachable_database_reads_as_unreadable_never_raises(run: PgRun) -> None:
    db = await run.clone()
    oracle = PostgresOracle(run.oracle_dsn(db))
    assert (await oracle.read()).readable
    await run.drop(db)  # closes the oracle's session too
    snap = await oracle.read()
    assert not snap.readable and snap.error and "postgres read failed" in snap.error
    bad = PostgresOracle("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    snap = await bad.read()
    assert not snap.readable and "OperationalError" in (snap.error or "")
    await oracle.close()
    assert (await oracle.read()).error == "the oracle was closed; its database is gone"


def test_iso_datetime_keeps_special_values() -> None:
    assert pg_oracle.iso_datetime("infinity") == "infinity"
    assert pg_oracle.iso_datetime("2026-01-02 03:04:05+00") == "2026-01-02T03:04:05Z"
    assert pg_oracle.iso_datetime("13:14:15+02") == "13:14:15+02:00"
    assert pg_oracle.json_value(float("-inf")) == "-Infinity"


async def test_a_scope_logs_the_effects_tables_in_full_and_a_digest_per_row_elsewhere(
    run: PgRun,
) -> None:
    """As the SQLite oracle: the table the effect names as read, every other one as its
    rows' ids and digests, which change when a row does (docs/event-log.md)."""
    db = await run.clone()
    async with await psycopg.AsyncConnection.connect(run.dsn(db), autocommit=True) as conn:
        await conn.execute(TYPES_ROW)
        await conn.execute("INSERT INTO other.side VALUES (1), (2)")
        scope = SnapshotScope.of(
            DiffEffect(changes=(Insert("bag", {"x": 1}),), keys={"other.side": ("id",)})
        )
        oracle = PostgresOracle(run.oracle_dsn(db), scope=scope)
        before = await oracle.read()
        await conn.execute("INSERT INTO bag VALUES (1, 'new')")
        await conn.execute("UPDATE typed SET t = 'changed'")
        after = await oracle.read()
    await oracle.close()
    assert after.rows("bag") == ({"x": 1, "y": "new"},)
    assert [set(r) for r in after.rows("typed")] == [{"id", DIGEST_FIELD}]
    assert [r["id"] for r in after.rows("other.side")] == [1, 2]
    assert after.rows("other.side") == before.rows("other.side")
    assert after.rows("typed") != before.rows("typed")
