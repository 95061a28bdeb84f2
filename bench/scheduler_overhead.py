"""Scheduler overhead: episodes/s and harness time per episode, with every event written.

An in-memory provider (tests/fakes.py) and a no-op arm, so what is measured is the
harness itself: planning, provisioning calls, oracle reads, eight chained events per
episode through the single log writer, teardown. Also a latency-bound case: arms that
sleep, at high concurrency, against the ideal (episodes / concurrency x sleep).

    python bench/scheduler_overhead.py [--episodes 20000] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fakes import FakeProvider, NoopArm, SleepArm

from effectbench.plan import ProviderInfo, build_plan
from effectbench.scheduler import Scheduler, SchedulerOptions


def _run(episodes: int, concurrency: int, arm: object, tasks: int = 100) -> tuple[float, int]:
    provider = FakeProvider(("ok",), n_tasks=tasks)
    trials = max(1, episodes // tasks)
    plan = build_plan(ProviderInfo("fake", "1.0"), provider.tasks(), [arm.name], trials)  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        sched = Scheduler(
            plan,
            provider,
            {arm.name: arm},  # type: ignore[attr-defined, dict-item]
            Path(tmp),
            run_id="bench",
            options=SchedulerOptions(concurrency=concurrency),
        )
        t0 = time.perf_counter()
        outcome = anyio.run(sched.run)
        elapsed = time.perf_counter() - t0
        lines = (Path(tmp) / "events.jsonl").read_bytes().count(b"\n")
    assert outcome.finished == plan.n_episodes, outcome
    return elapsed, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=20_000)
    ap.add_argument("--sleep-episodes", type=int, default=10_000)
    ap.add_argument("--no-sleep", action="store_true", help="skip the 1 s sleeping-arm case")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    print(f"{'case':<28}{'episodes':>9}{'events':>9}{'seconds':>9}{'ep/s':>10}{'us/ep':>9}")
    for conc in (1, 64, 1024):
        elapsed, lines = _run(args.episodes, conc, NoopArm())
        row = {
            "case": f"noop c={conc}",
            "episodes": args.episodes,
            "events": lines,
            "seconds": elapsed,
            "episodes_per_s": args.episodes / elapsed,
            "us_per_episode": elapsed / args.episodes * 1e6,
        }
        rows.append(row)
        print(
            f"{row['case']:<28}{args.episodes:>9}{lines:>9}{elapsed:>9.2f}{row['episodes_per_s']:>10.0f}{row['us_per_episode']:>9.1f}"
        )
    if not args.no_sleep:
        n, conc, sleep = args.sleep_episodes, 1000, 1.0
        elapsed, lines = _run(n, conc, SleepArm(sleep))
        ideal = n / conc * sleep
        row = {
            "case": f"sleep 1s c={conc}",
            "episodes": n,
            "events": lines,
            "seconds": elapsed,
            "ideal_seconds": ideal,
            "ratio_to_ideal": elapsed / ideal,
        }
        rows.append(row)
        print(
            f"{row['case']:<28}{n:>9}{lines:>9}{elapsed:>9.2f}   ideal {ideal:.1f}s, ratio {elapsed / ideal:.3f}"
        )
    if args.json:
        args.json.write_bytes(
            orjson.dumps({"bench": "scheduler_overhead", "rows": rows}, option=orjson.OPT_INDENT_2)
        )


if __name__ == "__main__":
    main()
