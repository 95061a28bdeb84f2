"""MockMed on PostgreSQL: episodes per second per arm and concurrency, and per-episode setup.

Each episode is what `effectbench run --provider mockmed-pg` does: a database leased from
the run's pool (a clone of the template with the product's and the oracle's connections
on it, made when no reset one is free), the product's seeding, a per-episode URL token
and aiohttp session, the arm's form POST (and, for effect_verified, two JSON readbacks)
through uvicorn, two oracle reads as the SELECT-only role in REPEATABLE READ
transactions, teardown (the database reset to the template's state for the next
episode, see effectbench.postgres.pool). One embedded server (from the wheel) serves every
case; each case is a run of its own (its own template, role and pool, so its first
`concurrency` episodes clone). Cases: both baseline arms at concurrency 1, 16 and 64,
the median of --runs runs. Then per-episode setup, serially (median ms): the template
clone, the drop, and the pool's reset of a used database.
Target: >= 100 episodes/s at concurrency 16.

    .venv/bin/python bench/postgres.py [--trials 10] [--runs 3] [--json PATH]
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
from _common import (
    baseline_run,
    load_line,
    loadavg,
    median,
    parser,
    table,
    throughput_row,
    write_json,
)
from effectbench_mockmed.pg_provider import MockMedPgProvider
from effectbench_mockmed.pg_store import PG_SCHEMA_DDL

from effectbench.postgres.databases import PgRun
from effectbench.postgres.pool import DatabasePool
from effectbench.postgres.server import EmbeddedServer

TARGET_AT_16 = 100.0
CORES = os.cpu_count() or 1


def server_cpu_s(postmaster: int) -> float:
    """CPU seconds the server has used: the postmaster's own and its reaped backends'
    (cutime/cstime), plus its live children's (checkpointer, walwriter, open sessions).
    Live processes are read from schedstat (ns): stat's 10 ms ticks would round a
    short-lived backend to zero."""
    tick = os.sysconf("SC_CLK_TCK")

    def on_cpu_s(pid: int) -> float:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9

    own = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
    total = (int(own[13]) + int(own[14])) / tick + on_cpu_s(postmaster)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == postmaster:
                total += on_cpu_s(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return total


def run_once(
    dsn: str, postmaster: int, arm_name: str, trials: int, concurrency: int
) -> tuple[float, float, float, int]:
    """(wall s, CPU s of this process, CPU s of the server, episodes) of one run."""
    return baseline_run(
        MockMedPgProvider(dsn=dsn), arm_name, trials, concurrency, lambda: server_cpu_s(postmaster)
    )


async def _setup_ms(dsn: str, n: int) -> dict[str, float]:
    async def build(conn: Any) -> None:
        await conn.execute(PG_SCHEMA_DDL)

    run = PgRun(dsn)
    await run.open(build)
    pool = DatabasePool(run)
    clone, drop, reset = [], [], []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            name = await run.clone()
            t1 = time.perf_counter()
            await run.drop(name)
            clone.append((t1 - t0) * 1e3)
            drop.append((time.perf_counter() - t1) * 1e3)
        db = await pool.lease()
        for _ in range(n):
            await db.product.execute(
                "INSERT INTO encounters(patient_id, type, note, source) VALUES ('p1', 'Triage', "
                "'n', 'form')"
            )
            t0 = time.perf_counter()
            await pool.give_back(db)
            db = await pool.lease()
            reset.append((time.perf_counter() - t0) * 1e3)
        await pool.give_back(db)
    finally:
        await pool.close()
        await run.close()
    return {"clone_ms": median(clone), "drop_ms": median(drop), "reset_ms": median(reset)}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--trials", type=int, default=10, help="trials per task (9 tasks)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument(
        "--arms",
        nargs="+",
        choices=["screen_only", "effect_verified"],
        default=["screen_only", "effect_verified"],
    )
    args = ap.parse_args()
    start_load = loadavg()
    server = EmbeddedServer()
    t0 = time.perf_counter()
    dsn = server.start()
    server_start_s = time.perf_counter() - t0
    assert server.dir is not None
    postmaster = int((server.dir / "data" / "postmaster.pid").read_text().split()[0])
    rows = []
    try:
        setup = anyio.run(_setup_ms, dsn, 50)
        for arm in args.arms:
            for conc in args.concurrency:
                walls, cpus, servers = [], [], []
                n = 0
                for _ in range(args.runs):
                    wall, cpu, srv, n = run_once(dsn, postmaster, arm, args.trials, conc)
                    walls.append(wall)
                    cpus.append(cpu)
                    servers.append(srv)
                cpu_ms = (median(cpus) + median(servers)) / n * 1e3
                rows.append(
                    throughput_row(arm, conc, n, walls, cpus)
                    | {
                        "server_cpu_ms_per_episode": median(servers) / n * 1e3,
                        "cpu_bound_episodes_per_s": CORES / cpu_ms * 1e3,
                    }
                )
    finally:
        server.stop()
    print(f"MockMed over HTTP + PostgreSQL, median of {args.runs} ({load_line()})")
    print(
        table(
            [
                "arm",
                "concurrency",
                "episodes",
                "wall s",
                "episodes/s",
                "ms/episode",
                "harness cpu ms/ep",
                "server cpu ms/ep",
                f"cpu-bound eps/s on {CORES}",
            ],
            [
                [
                    r["arm"],
                    r["concurrency"],
                    r["episodes"],
                    r["median_wall_s"],
                    r["episodes_per_s"],
                    r["ms_per_episode"],
                    r["cpu_ms_per_episode"],
                    r["server_cpu_ms_per_episode"],
                    r["cpu_bound_episodes_per_s"],
                ]
                for r in rows
            ],
        )
    )
    print(
        f"per-episode setup, serial median of 50: CREATE DATABASE ... TEMPLATE "
        f"{setup['clone_ms']:.1f} ms, DROP DATABASE {setup['drop_ms']:.1f} ms, the pool's "
        f"reset of a used database {setup['reset_ms']:.1f} ms; "
        f"server start (initdb + pg_ctl start) {server_start_s:.2f} s"
    )
    for r in rows:
        if r["concurrency"] == 16:
            ok = r["episodes_per_s"] >= TARGET_AT_16
            print(
                f"target >= {TARGET_AT_16:.0f} episodes/s at 16, {r['arm']}: "
                f"{r['episodes_per_s']:.0f} ({'met' if ok else 'MISSED'})"
            )
    write_json(
        args.json,
        "postgres",
        {
            "target_episodes_per_s_at_16": TARGET_AT_16,
            "rows": rows,
            "setup": setup,
            "server_start_s": server_start_s,
        },
        start_load,
    )


if __name__ == "__main__":
    main()
