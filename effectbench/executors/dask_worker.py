"""The worker's side of the dask executor: a run's provider and arms built and started
once per worker process and run id, and its episodes run there into buffers.

Each Dask task (``run_batch_on_worker``) runs a batch of whole episodes through the
same code as a local episode (run/episode.py's ``EpisodeRunner``), each into its own
buffer instead of the log, and returns their lines and outcomes; the harness writes them
(effectbench.executors.dask). ``stop_on_worker`` stops the provider at the end of the run.
Nothing here imports Dask but for the worker's name and address.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import attrs

from effectbench.core.arm import Arm
from effectbench.core.capabilities import ArmCapabilities, ProviderCapabilities
from effectbench.core.errors import ConfigurationError, one_line
from effectbench.core.events import EpisodePlanned
from effectbench.core.model import AgentReport, FailureClass, Snapshot
from effectbench.core.provider import BenchmarkProvider
from effectbench.run.episode import EpisodeOutcome, EpisodeRunner, Line
from effectbench.run.options import RunOptions
from effectbench.run.plan import EpisodeSpec, Plan

__all__ = ["Done", "WorkerSetup", "WorkerStartError", "run_batch_on_worker", "stop_on_worker"]

Done = tuple[
    list[Line],
    tuple[FailureClass | None, AgentReport | None, Snapshot | None, Snapshot | None] | None,
]
"""An episode as it travels back: its events and its outcome without the spec (None: it
was abandoned, counted as neither finished nor failed)."""


class WorkerStartError(ConfigurationError):
    """A worker could not build or start the run's provider or arms (one line, picklable)."""


@attrs.frozen
class WorkerSetup:
    """What every worker needs to run this run's episodes; sent to each worker once (and
    to a worker that joins or restarts), by a worker plugin."""

    run_id: str
    plan: Plan
    provider_ref: str
    arm_refs: tuple[str, ...]
    options: RunOptions
    state_root: str | None = None
    """The harness's state root for the run (effectbench.run.statedir): each worker hands
    its provider ``<root>/worker-<name>`` there, emptied when that worker starts."""


@attrs.define
class _WorkerRun:
    """A run's provider started on this worker, and the runner of its episodes, whose
    lines go into one buffer per episode instead of the log."""

    runner: EpisodeRunner
    buffers: dict[str, list[Line]]

    @classmethod
    def of(
        cls, setup: WorkerSetup, provider: BenchmarkProvider, arms: Mapping[str, Arm]
    ) -> _WorkerRun:
        buffers: dict[str, list[Line]] = {}

        async def emit(type_: str, data: Mapping[str, Any], ep: str | None = None) -> None:
            assert ep is not None
            buffers[ep].append((type_, data, ep, time.time()))

        caps = {name: ArmCapabilities.of(arm) for name, arm in arms.items()}
        runner = EpisodeRunner(provider, arms, caps, setup.options, Path("."), emit)
        return cls(runner, buffers)


_RUNS: dict[str, _WorkerRun | WorkerStartError] = {}
"""Per worker process: the started provider of each run (or why it could not start)."""
_STARTING: dict[str, anyio.Lock] = {}


def _where() -> str:
    try:
        from distributed import get_worker

        return f"worker {get_worker().address}"
    except (ImportError, ValueError):
        return "a worker"


def _build(setup: WorkerSetup) -> tuple[BenchmarkProvider, dict[str, Arm]]:
    from effectbench.run.registry import PluginError, Registry

    registry = Registry()
    try:
        provider = registry.provider(setup.provider_ref)
        arms = {}
        for ref in setup.arm_refs:
            arm = registry.arm(ref)
            arms[arm.name] = arm
    except PluginError as exc:
        raise WorkerStartError(
            f"{_where()} cannot load its plugins ({exc}); install the provider's and arms' "
            "distributions in every worker's environment"
        ) from None
    missing = [a for a in setup.plan.arms if a not in arms]
    if missing:
        raise ValueError(f"no arm instance for {', '.join(missing)}")
    return provider, arms


async def _worker_run(setup: WorkerSetup) -> _WorkerRun:
    run = _RUNS.get(setup.run_id)
    if run is None:
        lock = _STARTING.setdefault(setup.run_id, anyio.Lock())
        async with lock:
            run = _RUNS.get(setup.run_id)
            if run is None:
                run = await _start(setup)
                _RUNS[setup.run_id] = run
    if isinstance(run, WorkerStartError):
        raise WorkerStartError(str(run))  # a fresh one: a cached traceback would only grow
    return run


async def _start(setup: WorkerSetup) -> _WorkerRun | WorkerStartError:
    try:
        provider, arms = _build(setup)
    except WorkerStartError as exc:
        return exc
    try:
        _hand_state_dir(provider, setup.state_root)
        await provider.start()
    except Exception as exc:  # noqa: BLE001 - provider code; reported as the run's start failure
        return WorkerStartError(
            f"provider {provider.name!r} failed to start on {_where()}: {one_line(exc)}"
        )
    return _WorkerRun.of(setup, provider, arms)


def _worker_name() -> str:
    try:
        from distributed import get_worker

        name = str(get_worker().name)
    except (ImportError, ValueError):
        name = str(os.getpid())
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _hand_state_dir(provider: Any, root: str | None) -> None:
    """This worker's part of the run's state root, for a provider that takes one: what
    a killed worker of the same name left there is deleted first."""
    hand_over = ProviderCapabilities.of(provider).use_state_dir
    if root is None or hand_over is None:
        return
    mine = Path(root) / f"worker-{_worker_name()}"
    shutil.rmtree(mine, ignore_errors=True)
    mine.mkdir(parents=True)
    hand_over(mine)


def _slim(entries: list[Line], outcome: EpisodeOutcome | None) -> Done:
    """What the harness cannot rebuild itself: it holds each spec, so the planned event's
    data (the resolved effect, the bulk of an episode's bytes) and the outcome's spec do
    not travel back; the planned event keeps its time."""
    if entries and entries[0][0] == EpisodePlanned.TYPE:
        type_, _, ep, ts = entries[0]
        entries[0] = (type_, {}, ep, ts)
    if outcome is None:
        return entries, None
    return entries, (outcome.failure_class, outcome.report, outcome.pre, outcome.post)


async def _one_episode(run: _WorkerRun, spec: EpisodeSpec, out: list[Done], i: int) -> None:
    ep = spec.episode_id
    run.buffers[ep] = []
    try:
        outcome = await run.runner.run(spec)
        out[i] = _slim(run.buffers[ep], outcome)
    finally:
        run.buffers.pop(ep, None)


async def run_batch_on_worker(run_id: str, specs: list[EpisodeSpec]) -> list[Done]:
    """The Dask task: a batch of whole episodes, run concurrently; their events and outcomes.

    A batch, not one episode per task: Dask costs milliseconds per task (docs/scale-out.md),
    more than a slow agent's episodes can hide at a high concurrency. The run's setup is
    the one its worker plugin installed (dask_setup)."""
    from effectbench.executors.dask_setup import SETUPS

    setup = SETUPS.get(run_id)
    if not isinstance(setup, WorkerSetup):
        raise WorkerStartError(f"{_where()} was not given the setup of run {run_id}")
    run = await _worker_run(setup)
    out: list[Done] = [([], (FailureClass.UNKNOWN, None, None, None)) for _ in specs]
    async with anyio.create_task_group() as tg:
        for i, spec in enumerate(specs):
            tg.start_soon(_one_episode, run, spec, out, i)
    return out


async def stop_on_worker(run_id: str, timeout: float) -> str | None:
    """Stop this worker's provider of the run (if it started); the error, if any."""
    run = _RUNS.pop(run_id, None)
    _STARTING.pop(run_id, None)
    if not isinstance(run, _WorkerRun):
        return None
    with anyio.move_on_after(timeout) as scope:
        try:
            await run.runner.provider.stop()
        except Exception as exc:  # noqa: BLE001 - reported by the harness, never fatal
            return f"{type(exc).__name__}: {exc}"
    return f"did not finish within {timeout:g}s" if scope.cancelled_caught else None
