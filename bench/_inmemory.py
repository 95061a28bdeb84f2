"""A dict-backed provider and two trivial arms, so the benches measure the harness alone.

Nothing here does I/O: provisioning builds an empty row list, the oracle snapshots it,
teardown forgets it. What remains of an episode's cost is the scheduler's own work
(plan, provision call, two oracle reads, every event serialised, chained and written).
Files starting with ``_`` are helpers, not benches (``make bench`` skips them).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from effectbench.core.arm import TaskView
from effectbench.core.model import (
    AgentReport,
    Category,
    Effect,
    FieldEquals,
    JSONScalar,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Snapshot,
    TaskSpec,
)
from effectbench.core.provider import EnvHandle, ProvisionedEpisode
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions


def bench_task(i: int) -> TaskSpec:
    return TaskSpec(
        task_id=f"mem::task{i}",
        title=f"in-memory task {i}",
        substrate="web",
        category=Category.CONTROL,
        goal="Record the note for owner p1 and save it.",
        expected_effect=Effect(
            RecordWritten(table="notes", selector={"owner": "p1"}),
            (FieldEquals("note", ParamRef("note")),),
        ),
        oracle=OracleSpec(tables=("notes",)),
        correct_action_available=True,
        params={"note": "note {tag}"},
        solution={"owner": "p1", "note": ParamRef("note")},
    )


class _Oracle:
    def __init__(self, rows: list[dict[str, JSONScalar]]) -> None:
        self._rows = rows

    async def read(self) -> Snapshot:
        return Snapshot(readable=True, tables={"notes": tuple(dict(r) for r in self._rows)})


async def _nothing() -> None:
    return None


class InMemoryProvider:
    """``n_tasks`` identical control tasks over a per-episode list of rows."""

    name = "inmemory"
    version = "1.0"

    def __init__(self, n_tasks: int = 100) -> None:
        self._tasks = [bench_task(i) for i in range(n_tasks)]

    def tasks(self) -> Sequence[TaskSpec]:
        return list(self._tasks)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        rows: list[dict[str, JSONScalar]] = []
        return ProvisionedEpisode(
            env=EnvHandle(channels={"base_url": "memory://"}),
            oracle=_Oracle(rows),
            teardown=_nothing,
        )


class NoopArm:
    """Halts at once: the cheapest possible episode."""

    name = "noop"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        return AgentReport(reported_success=False, halted=True)


class SleepArm:
    """Sleeps (simulated agent latency), then halts."""

    name = "sleep"

    def __init__(self, seconds: float = 1.0) -> None:
        self.seconds = seconds

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        await anyio.sleep(self.seconds)
        return AgentReport(reported_success=False, halted=True)


def run_inmemory(
    episodes: int, concurrency: int, arm: NoopArm | SleepArm, n_tasks: int = 100
) -> tuple[float, int]:
    """Run ``episodes`` episodes through the real Scheduler into a temp log.

    Returns (wall seconds from scheduler start to the log closed, lines in the log)."""
    provider = InMemoryProvider(n_tasks)
    trials = max(1, episodes // n_tasks)
    plan = build_plan(
        ProviderInfo(provider.name, provider.version), provider.tasks(), [arm.name], trials
    )
    with tempfile.TemporaryDirectory() as tmp:
        sched = Scheduler(
            plan,
            provider,
            {arm.name: arm},
            Path(tmp),
            run_id="bench",
            options=SchedulerOptions(concurrency=concurrency),
        )
        t0 = time.perf_counter()
        outcome = anyio.run(sched.run)
        elapsed = time.perf_counter() - t0
        lines = (Path(tmp) / "events.jsonl").read_bytes().count(b"\n")
    if outcome.finished != plan.n_episodes:
        raise SystemExit(f"bench run did not finish every episode: {outcome}")
    return elapsed, lines
