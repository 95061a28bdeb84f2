"""The executors' seam: an executor sees a run only as an ``EpisodeSink``.

The Dask executor is handed a small sink of the test's own (no scheduler, no log
writer) and runs real episodes on a real local cluster into it: the sink receives
each episode whole, its lines in the order a local run logs them, the planned event's
data as the sink makes it, and the counts of what was handed out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from effectbench.core.events import (
    ArmStarted,
    ArmTelemetry,
    EpisodeFinished,
    EpisodePlanned,
    EpisodeProvisioned,
    PostRead,
    PreSnapshot,
    Reported,
)
from effectbench.executors.base import EpisodeSink
from effectbench.executors.dask import DaskExecutor
from effectbench.run.episode import EpisodeOutcome, Line
from effectbench.run.episode_events import PlannedEvents
from effectbench.run.health import Health
from effectbench.run.options import RunOptions
from effectbench.run.plan import EpisodeSpec, Plan, ProviderInfo, build_plan, episodes
from effectbench.testing import InMemoryProvider, NoopArm

pytestmark = pytest.mark.filterwarnings("ignore:Port .* is already in use:UserWarning")

LOCAL_ORDER = [
    EpisodePlanned.TYPE,
    EpisodeProvisioned.TYPE,
    PreSnapshot.TYPE,
    ArmStarted.TYPE,
    ArmTelemetry.TYPE,
    Reported.TYPE,
    PostRead.TYPE,
    EpisodeFinished.TYPE,
]


@attrs.define
class RecordingSink:
    """An EpisodeSink that keeps what it is handed, and nothing of a scheduler's."""

    run_id: str
    plan: Plan
    options: RunOptions
    run_dir: Path
    state_root: Path | None = None
    health: Health = attrs.Factory(Health)
    lines: list[Line] = attrs.Factory(list)
    outcomes: list[EpisodeOutcome | None] = attrs.Factory(list)
    handed_out: int = 0
    all_handed_out: bool = False
    start_error: str | None = None
    _planned: PlannedEvents = attrs.Factory(PlannedEvents)

    @property
    def start_failed(self) -> bool:
        return self.start_error is not None

    def planned(self, spec: EpisodeSpec) -> dict[str, Any]:
        return self._planned.data(spec)

    def started(self) -> None:
        self.handed_out += 1

    def all_started(self) -> None:
        self.all_handed_out = True

    def fail_start(self, message: str) -> None:
        self.start_error = message

    async def run_here(self, pending: Iterable[EpisodeSpec]) -> None:
        raise AssertionError("the dask executor runs no episode in the harness")

    async def record(self, entries: Sequence[Line], outcome: EpisodeOutcome | None = None) -> None:
        self.lines.extend(entries)
        self.outcomes.append(outcome)


@pytest.mark.timeout(300)
def test_the_dask_executor_runs_real_episodes_into_a_sink_of_its_own(tmp_path: Path) -> None:
    provider = InMemoryProvider(copies=2)
    plan = build_plan(
        ProviderInfo(provider.name, provider.version),
        provider.tasks(),
        ["noop"],
        2,
        refs={
            "provider": "effectbench.testing:InMemoryProvider",
            "arms": ["effectbench.testing:NoopArm"],
        },
    )
    assert NoopArm().name == "noop"
    sink = RecordingSink("sink-test", plan, RunOptions(concurrency=4), tmp_path)
    as_seen: EpisodeSink = sink  # the protocol is all the executor is given
    executor = DaskExecutor.parse("dask-local:1")
    anyio.run(executor.run_all, as_seen, episodes(plan))

    specs = {s.episode_id: s for s in episodes(plan)}
    by_ep: dict[str, list[Line]] = {}
    for line in sink.lines:
        assert line[2] is not None
        by_ep.setdefault(line[2], []).append(line)
    assert sorted(by_ep) == sorted(specs)
    for ep, lines in by_ep.items():
        assert [t for t, *_ in lines] == LOCAL_ORDER, ep
        assert lines[0][1] == PlannedEvents().data(specs[ep])  # rebuilt here, not shipped
        assert all(ts is not None for *_, ts in lines)  # each keeps the time it happened
    assert [o.failure_class if o else "abandoned" for o in sink.outcomes] == [None] * len(specs)
    assert sorted(o.spec.episode_id for o in sink.outcomes if o) == sorted(specs)
    assert (sink.handed_out, sink.all_handed_out, sink.start_error) == (len(specs), True, None)
