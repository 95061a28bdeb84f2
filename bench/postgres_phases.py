"""Where the PostgreSQL server's CPU goes in one mockmed-pg episode, phase by phase.

Serially, on one embedded server, each phase of an episode's database work timed by the
server's CPU (bench/postgres.py's probe: the postmaster, its live children from
schedstat, its reaped backends), for the two designs: a single-use database (clone,
two new sessions, the oracle's reads in cold backends, drop) and a pooled one (the
same database and sessions reused, reset between episodes). Medians over --episodes.

    .venv/bin/python bench/postgres_phases.py [--episodes 40] [--json PATH]
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import psycopg
from _common import load_line, loadavg, median, parser, table, write_json
from effectbench_mockmed.pg_store import PG_SCHEMA_DDL
from postgres import server_cpu_s

from effectbench.postgres.databases import PgRun
from effectbench.postgres.oracle import PostgresOracle
from effectbench.postgres.pool import DatabasePool
from effectbench.postgres.server import EmbeddedServer

INSERT = (
    "INSERT INTO encounters(patient_id, type, note, source, key) "
    "VALUES ('p1', 'Triage', 'n', 'form', NULL) RETURNING id"
)
READBACK = "SELECT id, patient_id, type, note, source, key FROM encounters ORDER BY id"
SETTLE_S = 0.05
"""Closed sessions exit asynchronously: wait before reading the reaped CPU."""


async def _build(conn: Any) -> None:
    await conn.execute(PG_SCHEMA_DDL)


class Phases:
    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster
        self.ms: dict[str, list[float]] = {}

    async def timed(
        self, name: str, step: Callable[[], Awaitable[Any]], settle: bool = False
    ) -> Any:
        before = server_cpu_s(self.postmaster)
        result = await step()
        if settle:
            await anyio.sleep(SETTLE_S)
        self.ms.setdefault(name, []).append((server_cpu_s(self.postmaster) - before) * 1e3)
        return result


async def _app_write(conn: Any) -> None:
    async with conn.transaction():
        await conn.execute(INSERT)


async def single_use(run: PgRun, p: Phases) -> None:
    name = await p.timed("CREATE DATABASE ... TEMPLATE", run.clone)
    product = await p.timed(
        "product session start (new database)",
        lambda: psycopg.AsyncConnection.connect(run.dsn(name), autocommit=True),
    )
    oracle = PostgresOracle(run.oracle_dsn(name))
    await p.timed("oracle read 1 (session start + cold catalog)", oracle.read)
    await p.timed("app write (one transaction)", lambda: _app_write(product))
    await p.timed("app readback", lambda: product.execute(READBACK))
    await p.timed("oracle read 2", oracle.read)

    async def close() -> None:
        await oracle.close()
        await product.close()

    await p.timed("both sessions end", close, settle=True)
    await p.timed("DROP DATABASE", lambda: run.drop(name), settle=True)


async def pooled(pool: DatabasePool, p: Phases) -> None:
    db = await p.timed("lease (a reset database)", pool.lease)
    oracle = PostgresOracle(pool.run.oracle_dsn(db.name), connection=db.oracle)
    await p.timed("oracle read 1", oracle.read)
    await p.timed("app write (one transaction)", lambda: _app_write(db.product))
    await p.timed("app readback", lambda: db.product.execute(READBACK))
    await p.timed("oracle read 2", oracle.read)
    await oracle.close()
    await p.timed("reset (give_back)", lambda: pool.give_back(db))


async def measure(dsn: str, postmaster: int, episodes: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    run = PgRun(dsn)
    await run.open(_build)
    pool = DatabasePool(run)
    try:
        single, pool_phases = Phases(postmaster), Phases(postmaster)
        await pool.give_back(await pool.lease())  # the pool's one clone, made up front
        for _ in range(episodes):
            await single_use(run, single)
            await pooled(pool, pool_phases)
        for design, phases in (("single-use", single), ("pooled", pool_phases)):
            out[design] = {k: median(v) for k, v in phases.ms.items()}
    finally:
        await pool.close()
        await run.close()
    return out


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--episodes", type=int, default=40)
    args = ap.parse_args()
    start_load = loadavg()
    server = EmbeddedServer()
    server.start()
    assert server.dir is not None
    postmaster = int((server.dir / "data" / "postmaster.pid").read_text().split()[0])
    t0 = time.perf_counter()
    try:
        figures = anyio.run(measure, server.dsn, postmaster, args.episodes)
    finally:
        server.stop()
    print(
        f"server CPU ms per phase, median of {args.episodes} serial episodes "
        f"({time.perf_counter() - t0:.1f} s; {load_line()})"
    )
    for design, phases in figures.items():
        rows: list[list[Any]] = [[k, v] for k, v in phases.items()]
        rows.append(["sum", sum(phases.values())])
        print(f"\n{design}")
        print(table(["phase", "server CPU ms"], rows))
    write_json(args.json, "postgres_phases", {"phases_ms": figures}, start_load)


if __name__ == "__main__":
    main()
