"""Planning memory: peak RSS of a run's setup for 10k, 100k and 1M planned episodes.

"Setup" is everything a run does before its first episode starts: list the provider's
tasks, build and hash the plan, create the run directory, take the lock, write
run.started, start the provider, begin walking the episodes. Each size runs in a fresh
subprocess through `effectbench.api.execute` (the CLI's code path) with the in-memory
provider (effectbench.testing.InMemoryProvider, 100 tasks) and two no-op arms; the provider's first
`provision` call reads the child's VmHWM from /proc/self/status, then stops the run
with a real SIGINT (handled as Ctrl-C). Reported per size: peak RSS at the first
episode, seconds from `execute` to the first episode, median of --runs. Target: peak
at 1M / peak at 10k <= 1.5.

    .venv/bin/python bench/plan_memory.py [--episodes 10000 100000 1000000] [--runs 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import orjson
from _common import load_line, loadavg, median, parser, table, write_json

from effectbench.core.model import TaskSpec
from effectbench.core.provider import ProvisionedEpisode
from effectbench.testing import InMemoryProvider, NoopArm

TARGET_RATIO = 1.5
N_TASKS = 100
ARMS = 2


def _hwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise SystemExit("no VmHWM in /proc/self/status (Linux only)")


class _ProbeProvider(InMemoryProvider):
    """Records the peak RSS and the time at the first provision, then sends Ctrl-C."""

    def __init__(self) -> None:
        super().__init__(copies=N_TASKS)
        self.first: tuple[int, float] | None = None

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        if self.first is None:
            self.first = (_hwm_kb(), time.perf_counter())
            os.kill(os.getpid(), signal.SIGINT)
        return await super().provision(task, trial, params)


class _NoopB(NoopArm):
    name = "noop_b"


def child(episodes: int) -> None:
    """One measurement in this (fresh) process; prints one JSON line."""
    from effectbench.api import execute

    provider = _ProbeProvider()
    trials = max(1, episodes // (N_TASKS * ARMS))
    base = _hwm_kb()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = anyio.run(
            lambda: execute(
                provider=provider,
                arms=[NoopArm(), _NoopB()],
                trials=trials,
                concurrency=64,
                out=Path(tmp) / "run",
                handle_signals=True,
            )
        )
    if provider.first is None or not result.interrupted:
        raise SystemExit("the run did not reach its first episode, or was not interrupted")
    peak, t_first = provider.first
    print(
        orjson.dumps(
            {
                "episodes": trials * N_TASKS * ARMS,
                "base_kb": base,
                "peak_kb": peak,
                "setup_s": t_first - t0,
                "final_kb": _hwm_kb(),
            }
        ).decode()
    )


def measure(episodes: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(episodes)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child for {episodes} episodes exited {proc.returncode}: {proc.stderr}")
    sample: dict[str, Any] = orjson.loads(proc.stdout.strip().splitlines()[-1])
    return sample


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--episodes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child)
        return
    start_load = loadavg()
    rows, samples = [], []
    for n in args.episodes:
        runs = [measure(n) for _ in range(args.runs)]
        samples.extend(runs)
        rows.append(
            {
                "episodes": runs[0]["episodes"],
                "base_mb": median([r["base_kb"] for r in runs]) / 1024,
                "peak_mb": median([r["peak_kb"] for r in runs]) / 1024,
                "setup_s": median([r["setup_s"] for r in runs]),
            }
        )
    print(load_line())
    print(
        table(
            ["planned episodes", "RSS after imports MB", "peak RSS at first episode MB", "setup s"],
            [[r["episodes"], r["base_mb"], r["peak_mb"], r["setup_s"]] for r in rows],
        )
    )
    small, large = min(rows, key=lambda r: r["episodes"]), max(rows, key=lambda r: r["episodes"])
    ratio = large["peak_mb"] / small["peak_mb"]
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    print(
        f"peak {large['episodes']:,} / {small['episodes']:,} episodes = {ratio:.3f}x "
        f"(target <= {TARGET_RATIO}x): {verdict}",
        flush=True,
    )
    write_json(
        args.json, "plan_memory", {"rows": rows, "ratio": ratio, "samples": samples}, start_load
    )
    if ratio > TARGET_RATIO:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
