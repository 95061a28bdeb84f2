"""Agent protocol overhead: no-op protocol agents through the real Scheduler.

The in-memory provider (effectbench.testing.InMemoryProvider) and a no-op agent
(bench/_noop_agent.py, answers every episode at once) isolate the protocol's own cost: the episode
line written, the report read back and parsed, and for one process per episode the process
start (a bubblewrap sandbox when isolated). Cases: the in-process no-op arm for
reference; one long-lived agent process serving every episode, plain and isolated;
one process per episode, plain and isolated. Target: >= 1,000 episodes/s for the
long-lived process at concurrency 64. The per-episode cost of an isolated process start
is reported at concurrency 1 (latency: the per-episode wall minus the long-lived one's).

    .venv/bin/python bench/agent_protocol.py [--episodes 20000] [--each-episodes 1000]
        [--runs 3] [--json PATH]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _common import inmemory_provider, load_line, loadavg, median, parser, table, write_json

from effectbench.agents import ExecArm
from effectbench.agents.reference import system_python
from effectbench.agents.sandbox import probe
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions
from effectbench.testing import NoopArm

TARGET_EPS_SHARED_AT_64 = 1000.0
NOOP_AGENT = Path(__file__).resolve().with_name("_noop_agent.py")


def _arm(mode: str, isolate: bool) -> Any:
    if mode == "in_process":
        return NoopArm()
    return ExecArm([system_python(), str(NOOP_AGENT)], name="noop", mode=mode, isolate=isolate)  # type: ignore[arg-type]


def run_once(arm: Any, episodes: int, concurrency: int) -> tuple[float, float]:
    """(wall seconds, harness CPU seconds) for ``episodes`` no-op episodes."""
    provider = inmemory_provider(100)
    plan = build_plan(
        ProviderInfo(provider.name, provider.version),
        provider.tasks(),
        [arm.name],
        max(1, episodes // 100),
    )
    with tempfile.TemporaryDirectory() as tmp:
        sched = Scheduler(
            plan, provider, {arm.name: arm}, Path(tmp), run_id="bench",
            options=SchedulerOptions(concurrency=concurrency),
        )  # fmt: skip
        c0, t0 = time.process_time(), time.perf_counter()
        outcome = anyio.run(sched.run)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if outcome.finished != plan.n_episodes:
        raise SystemExit(f"bench run did not finish every episode: {outcome}")
    return wall, cpu


def case(
    label: str, mode: str, isolate: bool, episodes: int, conc: int, runs: int
) -> dict[str, Any]:
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = run_once(_arm(mode, isolate), episodes, conc)
        walls.append(wall)
        cpus.append(cpu)
    wall = median(walls)
    return {
        "case": label, "mode": mode, "isolated": isolate, "concurrency": conc,
        "episodes": episodes, "runs": runs, "wall_s": walls, "median_wall_s": wall,
        "episodes_per_s": episodes / wall, "us_per_episode": wall / episodes * 1e6,
        "harness_cpu_us_per_episode": median(cpus) / episodes * 1e6,
    }  # fmt: skip


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--episodes", type=int, default=20_000)
    ap.add_argument("--each-episodes", type=int, default=1_000)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    start_load = loadavg()
    contained = probe()
    if not contained.available:
        print(f"containment unavailable ({contained.reason}): isolated cases skipped")
    n, each, c, r = args.episodes, args.each_episodes, args.concurrency, args.runs
    plan = [
        ("in-process no-op arm", "in_process", False, n, c),
        ("long-lived process", "shared", False, n, c),
        ("long-lived process, isolated", "shared", True, n, c),
        ("process per episode", "per_episode", False, each, c),
        ("process per episode, isolated", "per_episode", True, each, c),
        ("long-lived process, isolated", "shared", True, each // 4, 1),
        ("process per episode, isolated", "per_episode", True, each // 4, 1),
    ]
    rows = [case(*p, r) for p in plan if contained.available or not p[2]]
    print(f"agent protocol, no-op agent, median of {r} ({load_line()})")
    print(
        table(
            ["case", "concurrency", "episodes", "episodes/s", "us/episode", "harness cpu us/ep"],
            [
                [
                    x["case"],
                    x["concurrency"],
                    x["episodes"],
                    x["episodes_per_s"],
                    x["us_per_episode"],
                    x["harness_cpu_us_per_episode"],
                ]
                for x in rows
            ],
        )
    )
    shared = next(x for x in rows if x["mode"] == "shared" and x["concurrency"] == c)
    ok = shared["episodes_per_s"] >= TARGET_EPS_SHARED_AT_64
    print(
        f"target >= {TARGET_EPS_SHARED_AT_64:,.0f} episodes/s for a long-lived process at {c}: "
        f"{shared['episodes_per_s']:,.0f} ({'met' if ok else 'MISSED'})"
    )
    serial = {x["mode"]: x for x in rows if x["concurrency"] == 1}
    start_ms = None
    if len(serial) == 2:
        start_ms = (
            serial["per_episode"]["us_per_episode"] - serial["shared"]["us_per_episode"]
        ) / 1000
        print(f"isolated process start, per episode (concurrency 1): {start_ms:.1f} ms")
    write_json(
        args.json, "agent_protocol",
        {"target_episodes_per_s_shared": TARGET_EPS_SHARED_AT_64, "rows": rows,
         "isolated_process_start_ms": start_ms, "containment": contained.reason},
        start_load,
    )  # fmt: skip


if __name__ == "__main__":
    main()
