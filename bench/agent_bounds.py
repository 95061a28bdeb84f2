"""The cost of issue 25's agent bounds: the per-episode log budget and the supervisor.

Three figures. (1) ``Telemetry.action`` per call without a budget and with one (the
budget measures each action's detail as JSON): a small detail and a 1 KB one. (2) A
long-lived protocol agent sending 20 actions and a model call per episode through the
real Scheduler at concurrency 64, with the budget (as every run has it) and with the
recorder's budget switched off, so the difference is the budget's whole cost. (3) The
start of an uncontained per-episode process with the subreaper supervisor and without
it (concurrency 1 and 8): the supervisor is one more interpreter start.

    .venv/bin/python bench/agent_bounds.py [--episodes 4000] [--each-episodes 100]
        [--runs 3] [--json PATH]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import attrs
from _common import inmemory_provider, load_line, loadavg, median, parser, table, write_json

import effectbench.agents.exec as exec_mod
from effectbench.agents import ExecArm
from effectbench.agents.reference import system_python
from effectbench.core.agentlog import DEFAULT_LOG_BUDGET, LogBudget
from effectbench.core.provider import Telemetry
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions

HERE = Path(__file__).resolve().parent
NOOP = HERE / "_noop_agent.py"
ACTIONS = 20


def micro(detail: dict[str, Any], budget: bool, calls: int) -> float:
    """Nanoseconds per ``Telemetry.action`` call."""
    t = Telemetry(log_budget=LogBudget(1 << 40) if budget else None)
    t0 = time.perf_counter()
    for _ in range(calls):
        t.action("click", **detail)
    return (time.perf_counter() - t0) / calls * 1e9


@attrs.define
class _Unbudgeted(Telemetry):
    """A recorder that drops the budget the scheduler gives it (the 'without' case)."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, None if name == "log_budget" else value)


def _unbudgeted(provider: Any) -> Any:
    provision = provider.provision

    async def wrapped(*args: Any, **kw: Any) -> Any:
        ep = await provision(*args, **kw)
        env = attrs.evolve(ep.env, telemetry=_Unbudgeted())
        return attrs.evolve(ep, env=env)

    provider.provision = wrapped
    return provider


def run_once(arm: Any, episodes: int, concurrency: int, budget: bool = True) -> float:
    provider = inmemory_provider(100)
    if not budget:
        provider = _unbudgeted(provider)
    plan = build_plan(
        ProviderInfo(provider.name, provider.version), provider.tasks(), [arm.name],
        max(1, episodes // 100),
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        sched = Scheduler(plan, provider, {arm.name: arm}, Path(tmp), run_id="bench",
                          options=SchedulerOptions(concurrency=concurrency))  # fmt: skip
        t0 = time.perf_counter()
        outcome = anyio.run(sched.run)
        wall = time.perf_counter() - t0
    if outcome.finished != plan.n_episodes:
        raise SystemExit(f"bench run did not finish every episode: {outcome}")
    return wall


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--episodes", type=int, default=4_000)
    ap.add_argument("--each-episodes", type=int, default=100)
    args = ap.parse_args()
    start_load = loadavg()
    r = args.runs

    small, large = {"x": 1, "status": 200}, {"text": "y" * 1000}
    micro_rows = []
    for label, detail in (("small detail", small), ("1 KB detail", large)):
        off = median([micro(detail, False, 200_000) for _ in range(r)])
        on = median([micro(detail, True, 200_000) for _ in range(r)])
        micro_rows.append({"case": label, "ns_without": off, "ns_with": on, "ns_budget": on - off})

    chatty = [system_python(), str(NOOP), str(ACTIONS)]
    macro_rows = []
    for label, budget in (("with the budget", True), ("budget switched off", False)):
        walls = [
            run_once(ExecArm(chatty, name="chatty", isolate=False), args.episodes, 64, budget)
            for _ in range(r)
        ]
        w = median(walls)
        macro_rows.append({"case": label, "episodes": args.episodes, "wall_s": walls,
                           "episodes_per_s": args.episodes / w})  # fmt: skip

    start_rows = []
    for concurrency in (1, 8):
        for label, supervised in (("supervised", True), ("plain", False)):
            exec_mod._SUPERVISED = supervised  # type: ignore[misc]  # the bench's toggle
            arm = ExecArm([system_python(), str(NOOP)], name="noop", mode="per_episode",
                          isolate=False)  # fmt: skip
            w = median([run_once(arm, args.each_episodes, concurrency) for _ in range(r)])
            start_rows.append({"case": label, "concurrency": concurrency,
                               "episodes": args.each_episodes,
                               "ms_per_episode": w / args.each_episodes * 1e3})  # fmt: skip
    exec_mod._SUPERVISED = True  # type: ignore[misc]

    print(f"agent bounds, median of {r} ({load_line()})")
    print(
        table(
            ["Telemetry.action", "ns without budget", "ns with", "budget ns"],
            [[x["case"], x["ns_without"], x["ns_with"], x["ns_budget"]] for x in micro_rows],
        )
    )
    print(
        table(
            [f"{ACTIONS} actions/episode, c=64", "episodes", "episodes/s"],
            [[x["case"], x["episodes"], x["episodes_per_s"]] for x in macro_rows],
        )
    )
    print(table(["per-episode process", "concurrency", "episodes", "ms/episode"],
                [[x["case"], x["concurrency"], x["episodes"], x["ms_per_episode"]]
                 for x in start_rows]))  # fmt: skip
    write_json(args.json, "agent_bounds",
               {"default_log_budget": DEFAULT_LOG_BUDGET, "micro": micro_rows,
                "macro": macro_rows, "starts": start_rows}, start_load)  # fmt: skip


if __name__ == "__main__":
    main()
