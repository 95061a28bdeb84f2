"""Scheduler overhead: no-op episodes per second and harness time per episode.

The real Scheduler runs an in-memory provider (effectbench.testing.InMemoryProvider) and an arm that
halts at once, so the time measured is the harness's own: planning, the provision
call, two oracle reads, every event (eight per episode) serialised, hash-chained and
written by the single log writer, teardown. 20,000 episodes at concurrency 1, 64 and
1024; the median of --runs runs per case. Target: >= 5,000 episodes/s at 64.

    .venv/bin/python bench/scheduler_overhead.py [--episodes 20000] [--runs 3] [--json PATH]
"""

from __future__ import annotations

import time

from _common import load_line, loadavg, median, parser, run_inmemory, table, write_json

from effectbench.testing import NoopArm

TARGET_EPS_AT_64 = 5000.0


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--episodes", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 64, 1024])
    args = ap.parse_args()
    start_load = loadavg()
    rows = []
    for conc in args.concurrency:
        walls, cpus = [], []
        lines = 0
        for _ in range(args.runs):
            c0 = time.process_time()
            wall, lines = run_inmemory(args.episodes, conc, NoopArm())
            cpus.append(time.process_time() - c0)
            walls.append(wall)
        wall, cpu = median(walls), median(cpus)
        rows.append(
            {
                "concurrency": conc,
                "episodes": args.episodes,
                "events": lines,
                "runs": args.runs,
                "wall_s": walls,
                "median_wall_s": wall,
                "episodes_per_s": args.episodes / wall,
                "us_per_episode": wall / args.episodes * 1e6,
                "cpu_us_per_episode": cpu / args.episodes * 1e6,
                "events_per_s": lines / wall,
            }
        )
    print(
        f"scheduler overhead, no-op arm, {args.episodes:,} episodes, median of {args.runs} "
        f"({load_line()})"
    )
    print(
        table(
            ["concurrency", "events", "wall s", "episodes/s", "us/episode", "cpu us/episode"],
            [
                [
                    r["concurrency"],
                    r["events"],
                    r["median_wall_s"],
                    r["episodes_per_s"],
                    r["us_per_episode"],
                    r["cpu_us_per_episode"],
                ]
                for r in rows
            ],
        )
    )
    at64 = next((r for r in rows if r["concurrency"] == 64), None)
    if at64 is not None:
        ok = at64["episodes_per_s"] >= TARGET_EPS_AT_64
        print(
            f"target >= {TARGET_EPS_AT_64:,.0f} episodes/s at 64: {at64['episodes_per_s']:,.0f} "
            f"({'met' if ok else 'MISSED'})"
        )
    write_json(
        args.json,
        "scheduler_overhead",
        {"target_episodes_per_s_at_64": TARGET_EPS_AT_64, "rows": rows},
        start_load,
    )


if __name__ == "__main__":
    main()
