"""The Dask executor: the 1 s-latency case on dask-local:N, and no-op episodes/s.

Case 1 is bench/parallel_efficiency.py's (10,000 episodes of an arm that sleeps 1 s, at
concurrency 1,000; ideal 10 s) with every episode a Dask task on a LocalCluster. Its
ratio is taken over the episode phase (first episode started on a worker to the last
one written); cluster start-up and the providers' start are reported apart, since they
are paid once per run whatever its size. Target: <= 1.20 x ideal.

Case 2 is the in-memory no-op episode at concurrency 64: what one episode costs through
Dask (submit, schedule, run on a worker, return its events, write them).

    .venv/bin/python bench/dask_executor.py [--workers 2] [--episodes 10000] [--concurrency 1000]
        [--noop-episodes 2000] [--json PATH]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
from _common import inmemory_provider, load_line, loadavg, parser, table, write_json

from effectbench.core.events import TERMINAL_TYPES, EpisodePlanned
from effectbench.executors.dask import DaskExecutor
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions
from effectbench.testing import NoopArm, SleepArm

TARGET_RATIO = 1.20
REFS = {"sleep": "effectbench.testing:SleepArm", "noop": "effectbench.testing:NoopArm"}


def run_dask(episodes: int, concurrency: int, arm: Any, workers: int) -> dict[str, float]:
    """One run on dask-local:``workers``; the wall times of its phases, in seconds."""
    provider = inmemory_provider()
    trials = max(1, episodes // 100)
    plan = build_plan(
        ProviderInfo(provider.name, provider.version),
        provider.tasks(),
        [arm.name],
        trials,
        refs={"provider": "_common:inmemory_provider", "arms": [REFS[arm.name]]},
    )
    with tempfile.TemporaryDirectory() as tmp:
        sched = Scheduler(
            plan,
            provider,
            {arm.name: arm},
            Path(tmp),
            run_id="bench",
            options=SchedulerOptions(concurrency=concurrency),
            executor=DaskExecutor(None, workers),
        )
        t0 = time.time()
        outcome = anyio.run(sched.run)
        t_end = time.time()
        first = last = 0.0
        lines = 0
        with open(Path(tmp) / "events.jsonl", "rb") as f:
            for raw in f:
                lines += 1
                ev = orjson.loads(raw)
                if ev["type"] == EpisodePlanned.TYPE and not first:
                    first = ev["ts"]
                if ev["type"] in TERMINAL_TYPES:
                    last = max(last, ev["ts"])
    if outcome.finished != plan.n_episodes:
        raise SystemExit(f"bench run did not finish every episode: {outcome}")
    return {
        "episodes": plan.n_episodes,
        "events": lines,
        "startup_s": first - t0,
        "episodes_s": last - first,
        "shutdown_s": t_end - last,
        "wall_s": t_end - t0,
    }


def main() -> None:
    ap = parser(__doc__)
    ap.set_defaults(runs=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=1000)
    ap.add_argument("--sleep", type=float, default=1.0)
    ap.add_argument("--noop-episodes", type=int, default=2000)
    ap.add_argument("--noop-concurrency", type=int, default=64)
    args = ap.parse_args()
    start_load = loadavg()

    sleep = run_dask(args.episodes, args.concurrency, SleepArm(args.sleep), args.workers)
    ideal = sleep["episodes"] / args.concurrency * args.sleep
    ratio = sleep["episodes_s"] / ideal
    print(
        f"dask-local:{args.workers}, {sleep['episodes']:,} x {args.sleep:g} s at concurrency "
        f"{args.concurrency:,} ({load_line()})"
    )
    print(
        table(
            ["episodes", "ideal s", "episodes s", "ratio", "start-up s", "shut-down s", "wall s"],
            [
                [
                    sleep["episodes"],
                    ideal,
                    sleep["episodes_s"],
                    ratio,
                    sleep["startup_s"],
                    sleep["shutdown_s"],
                    sleep["wall_s"],
                ]
            ],
        )
    )
    print(
        f"target <= {TARGET_RATIO:.2f} x ideal (episode phase): {ratio:.3f} "
        f"({'met' if ratio <= TARGET_RATIO else 'MISSED'})"
    )

    noop = run_dask(args.noop_episodes, args.noop_concurrency, NoopArm(), args.workers)
    rate = noop["episodes"] / noop["episodes_s"]
    print(
        f"no-op episodes through dask-local:{args.workers} at concurrency {args.noop_concurrency}"
    )
    print(
        table(
            ["episodes", "episodes s", "episodes/s", "start-up s"],
            [[noop["episodes"], noop["episodes_s"], rate, noop["startup_s"]]],
        )
    )
    write_json(
        args.json,
        "dask_executor",
        {
            "workers": args.workers,
            "sleep_case": {
                **sleep,
                "ideal_s": ideal,
                "ratio_to_ideal": ratio,
                "concurrency": args.concurrency,
                "target_ratio": TARGET_RATIO,
            },
            "noop_case": {**noop, "episodes_per_s": rate, "concurrency": args.noop_concurrency},
        },
        start_load,
    )


if __name__ == "__main__":
    main()
