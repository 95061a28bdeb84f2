"""MockMed over real HTTP and SQLite: episodes per second per arm and concurrency, and `make demo`.

Each episode is what `effectbench run` does with the anchor: a fresh SQLite file copied
from the template and seeded, a per-episode URL token and aiohttp session, the arm's form
POST (and, for effect_verified, two JSON readbacks) through uvicorn, two read-only
oracle reads, teardown, eight-plus chained events. Cases: both baseline arms at
concurrency 1, 16 and 64, the median of --runs runs. Then the wall time of the demo
command (`effectbench run --out DIR --force`, what `make demo` runs) in a subprocess.
Target: >= 500 episodes/s at concurrency 64.

    .venv/bin/python bench/mockmed_http.py [--trials 80] [--runs 3] [--json PATH]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
from effectbench_mockmed import MockMedProvider

TARGET_AT_64 = 500.0
ROOT = Path(__file__).resolve().parent.parent


def run_once(arm_name: str, trials: int, concurrency: int) -> tuple[float, float, int]:
    """(wall s, CPU s of this process, episodes) of one run."""
    wall, cpu, _, n = baseline_run(MockMedProvider(), arm_name, trials, concurrency)
    return wall, cpu, n


def demo_wall() -> float:
    exe = Path(sys.executable).with_name("effectbench")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run(
            [str(exe), "run", "--out", str(Path(tmp) / "demo"), "--force"],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return time.perf_counter() - t0


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--trials", type=int, default=80, help="trials per task (9 tasks)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument(
        "--arms",
        nargs="+",
        choices=["screen_only", "effect_verified"],
        default=["screen_only", "effect_verified"],
    )
    ap.add_argument("--no-demo", action="store_true")
    args = ap.parse_args()
    start_load = loadavg()
    rows = []
    for arm in args.arms:
        for conc in args.concurrency:
            walls, cpus = [], []
            n = 0
            for _ in range(args.runs):
                wall, cpu, n = run_once(arm, args.trials, conc)
                walls.append(wall)
                cpus.append(cpu)
            rows.append(throughput_row(arm, conc, n, walls, cpus))
    demo = [demo_wall() for _ in range(args.runs)] if not args.no_demo else []
    print(f"MockMed over HTTP + SQLite, median of {args.runs} ({load_line()})")
    print(
        table(
            ["arm", "concurrency", "episodes", "wall s", "episodes/s", "ms/episode", "cpu ms/ep"],
            [
                [
                    r["arm"],
                    r["concurrency"],
                    r["episodes"],
                    r["median_wall_s"],
                    r["episodes_per_s"],
                    r["ms_per_episode"],
                    r["cpu_ms_per_episode"],
                ]
                for r in rows
            ],
        )
    )
    for r in rows:
        if r["concurrency"] == 64:
            ok = r["episodes_per_s"] >= TARGET_AT_64
            print(
                f"target >= {TARGET_AT_64:.0f} episodes/s at 64, {r['arm']}: "
                f"{r['episodes_per_s']:.0f} ({'met' if ok else 'MISSED'})"
            )
    if demo:
        print(f"demo run (effectbench run --out DIR --force): median {median(demo):.2f} s wall")
    write_json(
        args.json,
        "mockmed_http",
        {
            "target_episodes_per_s_at_64": TARGET_AT_64,
            "rows": rows,
            "demo_wall_s": demo,
            "demo_median_s": median(demo) if demo else None,
        },
        start_load,
    )


if __name__ == "__main__":
    main()
