"""Large MockMed-shaped run logs, made in seconds, for memory and speed measurements.

A real one-trial anchor run (the nine MockMed tasks under both baselines) is recorded
once; every later trial repeats its episodes with that trial's payload tag and episode
id substituted, interleaved ``WINDOW`` episodes at a time as a concurrent run writes
them, through ``write_events_sync`` (same format, same hash chain). The log's
run.started carries the real plan for that many trials, so ``verify`` and ``rescore``
judge it as they judge a run that really happened.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import anyio
import attrs
import orjson

from effectbench.core import versions
from effectbench.core.model import trial_tag
from effectbench.core.rundir import LOG_FILE
from effectbench.log.reader import LogEntry, read_log, write_events_sync

__all__ = ["ARMS", "WINDOW", "Template", "make_log", "record_template"]

ARMS: Final = ("screen_only", "effect_verified")
WINDOW: Final = 64
"""Episodes interleaved at a time, as a run at concurrency 64 writes them."""


@attrs.frozen
class Template:
    """One recorded trial: the run.started data and each episode's (type, data json)."""

    started: dict[str, Any]
    episodes: tuple[tuple[str, tuple[tuple[str, bytes], ...]], ...]

    @property
    def events_per_trial(self) -> int:
        return sum(len(evs) for _, evs in self.episodes)


def record_template(tmp: Path) -> Template:
    """Run the one-trial anchor into ``tmp`` and keep its events."""
    from effectbench_mockmed import MockMedProvider

    from effectbench.arms.baselines import EffectVerifiedArm, ScreenOnlyArm
    from effectbench.core.arm import Arm
    from effectbench.run.plan import ProviderInfo, build_plan
    from effectbench.run.scheduler import Scheduler, SchedulerOptions

    provider = MockMedProvider()
    arms: dict[str, Arm] = {"screen_only": ScreenOnlyArm(), "effect_verified": EffectVerifiedArm()}
    plan = build_plan(ProviderInfo(provider.name, provider.version), provider.tasks(), ARMS, 1)
    sched = Scheduler(
        plan, provider, arms, tmp, run_id="biglog", options=SchedulerOptions(concurrency=1)
    )
    anyio.run(sched.run)
    started: dict[str, Any] = {}
    episodes: dict[str, list[tuple[str, bytes]]] = {}
    for ev in read_log(tmp / LOG_FILE):
        if ev.ep is None:
            if ev.type == "run.started":
                started = ev.data
            continue
        episodes.setdefault(ev.ep, []).append((ev.type, orjson.dumps(ev.data)))
    return Template(started, tuple((ep, tuple(evs)) for ep, evs in episodes.items()))


def _arm_and_task(ep: str) -> tuple[str, str]:
    arm, rest = ep.split("::", 1)
    return arm, rest.rsplit("::t", 1)[0]


def _replanned(data: bytes, trial: int) -> bytes:
    """An episode.planned of trial 0, moved to ``trial`` (payload already substituted):
    the effect's hash is taken again, as the scheduler takes it."""
    planned = orjson.loads(data)
    planned["trial"] = trial
    effect = orjson.dumps(planned["effect"], option=orjson.OPT_SORT_KEYS)
    planned["effect_hash"] = hashlib.sha256(effect).hexdigest()
    return orjson.dumps(planned)


def entries(template: Template, trials: int) -> Iterator[LogEntry]:
    """The log entries of a ``trials``-trial run made of ``template``."""
    from effectbench_mockmed import MockMedProvider

    from effectbench.run.plan import ProviderInfo, build_plan

    provider = MockMedProvider()
    harness = f"{versions.HARNESS_DISTRIBUTION}=={versions.PACKAGE_VERSION}"  # the baselines
    plan = build_plan(
        ProviderInfo(provider.name, provider.version),
        provider.tasks(),
        ARMS,
        trials,
        arm_versions=dict.fromkeys(ARMS, harness),
    )
    started = {**template.started, "plan": plan.to_json(), "plan_hash": plan.plan_hash}
    yield ("run.started", started, None)
    tag0 = {
        task: trial_tag(task, 0).encode()
        for task in (_arm_and_task(e)[1] for e, _ in template.episodes)
    }
    window: list[tuple[str, list[tuple[str, bytes]]]] = []

    def flush() -> Iterator[LogEntry]:
        for k in range(max(len(evs) for _, evs in window)):
            for ep, evs in window:
                if k < len(evs):
                    yield (evs[k][0], orjson.loads(evs[k][1]), ep)
        window.clear()

    finished = 0
    for trial in range(trials):
        for ep0, evs in template.episodes:
            arm, task = _arm_and_task(ep0)
            old, new = tag0[task], trial_tag(task, trial).encode()
            out = []
            for kind, data in evs:
                data = data.replace(old, new)
                if kind == "episode.planned":
                    data = _replanned(data, trial)
                out.append((kind, data))
            window.append((f"{arm}::{task}::t{trial}", out))
            finished += 1
            if len(window) == WINDOW:
                yield from flush()
    if window:
        yield from flush()
    done = {"interrupted": False, "episodes_finished": finished, "episodes_failed": 0}
    yield ("run.finished", done, None)


def make_log(
    run_dir: Path, template: Template, *, events: int | None = None, episodes: int | None = None
) -> int:
    """Write a log of about ``events`` events or ``episodes`` episodes into a new
    ``run_dir``; returns the number of events written."""
    per_trial = len(template.episodes)
    if episodes is not None:
        trials = max(1, round(episodes / per_trial))
    elif events is not None:
        trials = max(1, round((events - 2) / template.events_per_trial))
    else:
        raise ValueError("give events or episodes")
    run_dir.mkdir()
    return write_events_sync(run_dir / LOG_FILE, entries(template, trials)).count
