"""Parallel efficiency: 10,000 episodes of an arm that sleeps 1 s, at concurrency 1,000.

Ideal wall time is episodes / concurrency x sleep = 10 s; the ratio shows what the
harness adds on top of pure agent latency (scheduling, events, chain, teardown).
Target: wall <= 1.10 x ideal. Runs once by default (each run takes >= 10 s).

    .venv/bin/python bench/parallel_efficiency.py [--episodes 10000] [--concurrency 1000]
        [--runs 1] [--json PATH]
"""

from __future__ import annotations

from _common import load_line, loadavg, median, parser, run_inmemory, table, write_json

from effectbench.testing import SleepArm

TARGET_RATIO = 1.10


def main() -> None:
    ap = parser(__doc__)
    ap.set_defaults(runs=1)
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=1000)
    ap.add_argument("--sleep", type=float, default=1.0)
    args = ap.parse_args()
    start_load = loadavg()
    ideal = args.episodes / args.concurrency * args.sleep
    walls = []
    lines = 0
    for _ in range(args.runs):
        wall, lines = run_inmemory(args.episodes, args.concurrency, SleepArm(args.sleep))
        walls.append(wall)
    wall = median(walls)
    ratio = wall / ideal
    print(
        f"parallel efficiency, {args.episodes:,} x {args.sleep:g} s at concurrency "
        f"{args.concurrency:,}, median of {args.runs} ({load_line()})"
    )
    print(
        table(
            ["episodes", "events", "ideal s", "wall s", "ratio"],
            [[args.episodes, lines, ideal, wall, ratio]],
        )
    )
    print(
        f"target <= {TARGET_RATIO:.2f} x ideal: {ratio:.3f} "
        f"({'met' if ratio <= TARGET_RATIO else 'MISSED'})"
    )
    write_json(
        args.json,
        "parallel_efficiency",
        {
            "episodes": args.episodes,
            "concurrency": args.concurrency,
            "sleep_s": args.sleep,
            "events": lines,
            "ideal_s": ideal,
            "wall_s": walls,
            "median_wall_s": wall,
            "ratio_to_ideal": ratio,
            "target_ratio": TARGET_RATIO,
        },
        start_load,
    )


if __name__ == "__main__":
    main()
