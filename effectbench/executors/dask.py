"""Run episodes on Dask's distributed scheduler; this process stays the log's one writer.

Each episode (provision, pre-snapshot, arm, post-read, teardown) is one Dask task. On
the worker it runs through the same code as a local episode (``Scheduler.run_episode``),
into a buffer instead of the log; the task returns the episode's events, each with the
time it happened, and the harness writes them (assigning seq and hash) only once the
whole episode has returned. So a lost worker leaves nothing of its in-flight episodes in
the log, and they are run again on fresh systems of record, as a resume would.

Dask's own re-runs are off (``allowed_failures`` 0): a task whose worker died fails with
KilledWorker and the harness decides what to do, so no episode can count twice.

On a worker, the provider and arms are built from their entry points (or
``module:attribute`` references) once per worker process and run id, started there
once, and stopped at the end of the run.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs
import structlog

from effectbench.core.capabilities import ProviderCapabilities
from effectbench.core.errors import ConfigurationError
from effectbench.core.events import EpisodeAbandoned, EpisodeFailed, EpisodePlanned, event_data
from effectbench.core.model import AgentReport, FailureClass, Snapshot
from effectbench.core.services import ServiceLoss
from effectbench.executors.base import INSTALL_HINT, ExecutorError
from effectbench.run.health import Health
from effectbench.run.plan import EpisodeSpec, Plan
from effectbench.run.scheduler import EpisodeOutcome, Scheduler, SchedulerOptions

log = structlog.get_logger("effectbench.executors.dask")

MAX_LOST = 3
"""Times one episode may lose its worker before it is recorded as failed (``unknown``)."""

Entry = tuple[str, Mapping[str, Any], str | None, float | None]
Done = tuple[
    list[Entry], tuple[FailureClass | None, AgentReport | None, Snapshot | None, Snapshot | None]
]
"""An episode as it travels back: its events and its outcome without the spec."""
TASKS_PER_WORKER = 8
"""Batches in flight per worker: enough to keep its event loop busy while results travel."""
MAX_BATCH = 64
CLOSE_TIMEOUT = 30.0
"""Seconds to close the client and a local cluster at the end of a run."""
LOST_CLOSE_TIMEOUT = 5.0
"""The same once the workers or the scheduler were lost: there is nothing left to wait for."""
POLL_S = 1.0
"""How often the harness asks the scheduler which workers are running (at most)."""


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
    options: SchedulerOptions
    state_root: str | None = None
    """The harness's state root for the run (effectbench.run.statedir): each worker hands
    its provider ``<root>/worker-<name>`` there, emptied when that worker starts."""


# ---------------------------------------------------------------- on the worker


@attrs.define
class _WorkerRun:
    scheduler: Scheduler
    buffers: dict[str, list[Entry]] = attrs.Factory(dict)
    outcomes: dict[str, EpisodeOutcome] = attrs.Factory(dict)

    async def emit(self, type_: str, data: Mapping[str, Any], ep: str | None = None) -> None:
        assert ep is not None
        self.buffers[ep].append((type_, data, ep, time.time()))

    def episode_done(self, outcome: EpisodeOutcome) -> None:
        self.outcomes[outcome.spec.episode_id] = outcome

    def run_planned(self, plan: Plan, total: int, already_done: int) -> None:
        pass


_RUNS: dict[str, _WorkerRun | WorkerStartError] = {}
"""Per worker process: the started provider of each run (or why it could not start)."""
_STARTING: dict[str, anyio.Lock] = {}


def _where() -> str:
    try:
        from distributed import get_worker

        return f"worker {get_worker().address}"
    except (ImportError, ValueError):
        return "a worker"


def _build(setup: WorkerSetup) -> Scheduler:
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
    return Scheduler(
        setup.plan, provider, arms, Path("."), run_id=setup.run_id, options=setup.options
    )


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
        scheduler = _build(setup)
    except WorkerStartError as exc:
        return exc
    run = _WorkerRun(scheduler)
    scheduler.observer = run
    scheduler.bind_emit(run.emit)
    try:
        _hand_state_dir(scheduler.provider, setup.state_root)
        await scheduler.provider.start()
    except Exception as exc:  # noqa: BLE001 - provider code; reported as the run's start failure
        from effectbench.run.scheduler import _one_line

        return WorkerStartError(
            f"provider {scheduler.provider.name!r} failed to start on {_where()}: {_one_line(exc)}"
        )
    return run


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


def _slim(entries: list[Entry], outcome: EpisodeOutcome) -> Done:
    """What the harness cannot rebuild itself: it holds each spec, so the planned event's
    data (the resolved effect, the bulk of an episode's bytes) and the outcome's spec do
    not travel back; the planned event keeps its time."""
    if entries and entries[0][0] == EpisodePlanned.TYPE:
        type_, _, ep, ts = entries[0]
        entries[0] = (type_, {}, ep, ts)
    return entries, (outcome.failure_class, outcome.report, outcome.pre, outcome.post)


def _fill(
    spec: EpisodeSpec, done: Done, scheduler: Scheduler
) -> tuple[list[Entry], EpisodeOutcome]:
    entries, (failure_class, report, pre, post) = done
    if entries and entries[0][0] == EpisodePlanned.TYPE:
        type_, _, ep, ts = entries[0]
        entries[0] = (type_, scheduler.planned_data(spec), ep, ts)
    return entries, EpisodeOutcome(spec, failure_class, report, pre, post)


async def _one_episode(run: _WorkerRun, spec: EpisodeSpec, out: list[Done], i: int) -> None:
    ep = spec.episode_id
    run.buffers[ep] = []
    try:
        await run.scheduler.run_episode(spec)
        out[i] = _slim(run.buffers[ep], run.outcomes[ep])
    finally:
        run.buffers.pop(ep, None)
        run.outcomes.pop(ep, None)


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
            await run.scheduler.provider.stop()
        except Exception as exc:  # noqa: BLE001 - reported by the harness, never fatal
            return f"{type(exc).__name__}: {exc}"
    return f"did not finish within {timeout:g}s" if scope.cancelled_caught else None


@contextmanager
def _client_logs_quiet() -> Iterator[None]:
    """While the harness talks to a user's scheduler, Dask's client does not print its
    own tracebacks when that scheduler goes away: the run says so in one line."""
    import logging

    logger = logging.getLogger("distributed.client")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


async def _closed(thing: Any, health: Health) -> None:
    """Close a client or cluster even while the run is being cancelled (Ctrl-C), bounded
    (briefly once the cluster was lost: there is nothing left to wait for)."""
    limit = LOST_CLOSE_TIMEOUT if health.fatal else CLOSE_TIMEOUT
    with anyio.CancelScope(shield=True), anyio.move_on_after(limit):
        await thing.close()


def _no_retries(dask_scheduler: Any) -> None:
    """Dask re-runs a task whose worker died; we re-run the episode ourselves."""
    dask_scheduler.allowed_failures = 0


# ---------------------------------------------------------------- in the harness


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ExecutorError(f"--executor dask needs Dask: {INSTALL_HINT}") from None
    return distributed


@asynccontextmanager
async def _setup_on_workers(client: Any, setup: WorkerSetup, health: Health) -> AsyncIterator[str]:
    """Give every worker, present or future, the run's setup (a worker plugin, see
    dask_setup); what each task is given to find it: the run id."""
    from effectbench.executors.dask_setup import SetupPlugin

    plugin = SetupPlugin(setup.run_id, setup)
    await client.register_plugin(plugin)
    try:
        yield setup.run_id
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
            try:
                if not health.fatal:  # a lost cluster has no plugin left to remove
                    await client.unregister_worker_plugin(plugin.name)
            except Exception as exc:  # noqa: BLE001 - the run's result stands
                log.warning("worker_plugin.unregister_failed", error=f"{type(exc).__name__}: {exc}")


def _setup(scheduler: Scheduler) -> WorkerSetup:
    refs = scheduler.plan.refs
    prov_ref = refs.get("provider")
    arm_refs = list(refs.get("arms") or [])
    if (
        not isinstance(prov_ref, str)
        or len(arm_refs) != len(scheduler.plan.arms)
        or not all(isinstance(r, str) for r in arm_refs)
    ):
        raise ExecutorError(
            "the dask executor builds the provider and arms on each worker, so give them as "
            "entry-point names or module:attribute references, not objects"
        )
    options = attrs.evolve(scheduler.options, handle_signals=False)
    root = None if scheduler.state_root is None else str(scheduler.state_root)
    return WorkerSetup(
        scheduler.run_id, scheduler.plan, prov_ref, tuple(arm_refs), options, state_root=root
    )


def batch_size(concurrency: int, workers: int) -> int:
    """Episodes per Dask task, so that about TASKS_PER_WORKER tasks per worker hold
    ``concurrency`` episodes in flight."""
    return max(1, min(MAX_BATCH, concurrency // (TASKS_PER_WORKER * workers)))


def local_slots(concurrency: int, workers: int) -> int:
    """Tasks each LocalCluster worker runs at once: never more episodes than ``concurrency``
    in all (at least one task per worker)."""
    return max(1, concurrency // batch_size(concurrency, workers) // workers)


@attrs.frozen
class DaskExecutor:
    """``dask://HOST:PORT`` (a running scheduler) or ``dask-local:N`` (a LocalCluster)."""

    address: str | None = None
    n_workers: int = 0

    @classmethod
    def parse(cls, value: str) -> DaskExecutor:
        if value.startswith("dask-local:"):
            n = value.removeprefix("dask-local:")
            if not n.isdigit() or not 1 <= int(n) <= 256:
                raise ExecutorError(
                    f"--executor dask-local:N needs N worker processes from 1 to 256, got {value!r}"
                )
            executor = cls(None, int(n))
        else:
            rest = value.removeprefix("dask://")
            host, _, port = rest.rpartition(":")
            if not host or not port.isdigit():
                raise ExecutorError(
                    f"--executor dask://HOST:PORT needs a host and port, got {value!r}"
                )
            executor = cls(f"tcp://{rest}")
        _import_distributed()
        return executor

    @asynccontextmanager
    async def _client(self, concurrency: int, health: Health, scratch: Path | None = None) -> Any:
        distributed = _import_distributed()
        if self.address is not None:
            try:
                client = await distributed.Client(
                    self.address, asynchronous=True, timeout="10s", set_as_default=False
                )
            except OSError as exc:
                raise ExecutorError(
                    f"cannot reach the Dask scheduler at {self.address} ({exc}); start it with "
                    "`dask scheduler` and give its address"
                ) from None
            with _client_logs_quiet():
                try:
                    yield client
                finally:
                    await _closed(client, health)
            return
        cluster = await self._local_cluster(distributed, concurrency, scratch)
        try:
            client = await distributed.Client(
                cluster, asynchronous=True, set_as_default=False, direct_to_workers=True
            )
            try:
                yield client
            finally:
                await _closed(client, health)
        finally:
            await _closed(cluster, health)

    async def _local_cluster(
        self, distributed: Any, concurrency: int, scratch: Path | None = None
    ) -> Any:
        import logging
        import warnings

        from effectbench.executors import dask_worker_init as worker_init

        with warnings.catch_warnings():
            # its (dashboard-less) HTTP server says so when another cluster holds port 8787
            warnings.filterwarnings("ignore", "Port .* is already in use", UserWarning)
            return await distributed.LocalCluster(
                n_workers=self.n_workers,
                threads_per_worker=local_slots(concurrency, self.n_workers),
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
                asynchronous=True,
                silence_logs=logging.CRITICAL,
                preload=[worker_init.MODULE],
                # the workers' scratch space under the run's state root, not $TMPDIR
                **(
                    {}
                    if scratch is None
                    else {
                        "local_directory": str(scratch),
                        "scheduler_kwargs": {"local_directory": str(scratch)},
                    }
                ),
            )

    async def run_all(self, scheduler: Scheduler, pending: Iterable[EpisodeSpec]) -> None:
        setup = _setup(scheduler)
        distributed = _import_distributed()
        async with (
            self._client(
                scheduler.options.concurrency,
                scheduler.health,
                None if scheduler.state_root is None else scheduler.state_root / "dask",
            ) as client,
            _setup_on_workers(client, setup, scheduler.health) as shared,
        ):
            await client.run_on_scheduler(_no_retries)
            workers = max(1, self.n_workers or len(client.scheduler_info()["workers"]))
            concurrency = scheduler.options.concurrency
            batch = batch_size(concurrency, workers)
            tasks = max(1, concurrency // batch)
            if self.address is None and local_slots(concurrency, workers) * workers <= tasks:
                # our own workers' slots already bound what runs: one more batch per worker
                # may wait on it, so a freed slot starts the next without a round trip here
                tasks += workers
            run = _HarnessRun(
                scheduler,
                client,
                shared,
                distributed.KilledWorker,
                distributed.client.FutureCancelledError,
                batch,
                tasks,
                self.address,
            )
            try:
                await run.run(pending)
            finally:
                with anyio.CancelScope(shield=True):
                    await run.stop()


@attrs.define
class _HarnessRun:
    scheduler: Scheduler
    client: Any
    shared: Any
    killed: type[BaseException]
    """Dask's KilledWorker: the worker running the batch died."""
    cut: type[BaseException]
    """Dask's FutureCancelledError: the client lost the scheduler (or the run cancelled it)."""
    batch: int
    tasks: int
    """Batches submitted at once."""
    address: str | None = None
    """The user's scheduler (``dask://``); None for the harness's own LocalCluster."""
    inflight: set[Any] = attrs.Factory(set)
    held: dict[int, list[EpisodeSpec]] = attrs.Factory(dict)
    """The batches not yet written, by slot: what a lost cluster leaves unrun."""
    loss: ServiceLoss | None = None

    async def run(self, pending: Iterable[EpisodeSpec]) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch_workers, tg.cancel_scope)
            await self._submit(pending)
            tg.cancel_scope.cancel()  # every batch was written: the watch ends too
        if self.loss is not None:
            await self._abandon_held()

    async def _watch_workers(self, group: anyio.CancelScope) -> None:
        """End the run when no worker has run for ``worker_timeout`` seconds (or the
        scheduler has not answered for as long): Dask would wait for one for ever."""
        limit = self.scheduler.options.worker_timeout
        poll = min(POLL_S, limit / 4)
        seen = anyio.current_time()
        while True:
            running = await self._running_workers(limit)
            if running:
                seen = anyio.current_time()
            elif anyio.current_time() - seen >= limit:
                if running is None:
                    service, how = f"the Dask scheduler at {self.address}", "unreachable"
                else:
                    service, how = "the Dask workers", "no live worker"
                self.loss = ServiceLoss(service, f"{how} for {limit:g}s")
                group.cancel()
                return
            await anyio.sleep(poll)

    async def _running_workers(self, limit: float) -> int | None:
        """How many workers the scheduler has running; None when it did not answer."""
        with anyio.move_on_after(limit):
            try:
                return len(await self.client.scheduler.ncores_running())
            except Exception:  # noqa: BLE001 - any failure to answer is an unreachable scheduler
                return None
        return None

    async def _abandon_held(self) -> None:
        """The batches the lost cluster held: planned, then abandoned, so the log says
        which episodes it took; ``--resume`` runs them again."""
        assert self.loss is not None
        reason = f"{self.loss.service} died ({self.loss.how}) while it ran; resume runs it again"
        held = [spec for chunk in self.held.values() for spec in chunk]
        with anyio.CancelScope(shield=True):
            for spec in held:
                ep = spec.episode_id
                await self.scheduler.write_events(
                    [
                        (EpisodePlanned.TYPE, self.scheduler.planned_data(spec), ep, None),
                        (EpisodeAbandoned.TYPE, event_data(EpisodeAbandoned(reason)), ep, None),
                    ]
                )
        self.held.clear()
        self.scheduler.health.lost(attrs.evolve(self.loss, abandoned=len(held)))

    async def _submit(self, pending: Iterable[EpisodeSpec]) -> None:
        # in flight: at most ``concurrency`` episodes, in tasks of up to ``batch`` each
        limiter = anyio.CapacityLimiter(self.tasks)
        specs = iter(pending)
        async with anyio.create_task_group() as tg:
            while True:
                token = object()
                await limiter.acquire_on_behalf_of(token)
                chunk = [spec for _, spec in zip(range(self.batch), specs, strict=False)]
                if not chunk or self.scheduler._start_error is not None:
                    limiter.release_on_behalf_of(token)
                    break
                tg.start_soon(self._slot, chunk, limiter, token, tg.cancel_scope)
                for _ in chunk:
                    self.scheduler.note_started()
            if self.scheduler._start_error is None:
                self.scheduler.note_started(all_started=True)

    async def _slot(
        self, chunk: list[EpisodeSpec], limiter: anyio.CapacityLimiter, token: object, group: Any
    ) -> None:
        self.held[id(token)] = chunk
        try:
            await self._batch(chunk, group, id(token))
        finally:
            limiter.release_on_behalf_of(token)

    async def _batch(self, chunk: list[EpisodeSpec], group: Any, slot: int) -> None:
        lost = 0
        while lost <= MAX_LOST:
            future = self.client.submit(
                run_batch_on_worker,
                self.shared,
                chunk,
                key=f"effectbench-episodes-{uuid.uuid4().hex}",
                pure=False,
                retries=0,
            )
            self.inflight.add(future)
            try:
                done: list[Done] = await future
            except WorkerStartError as exc:
                del self.held[slot]
                self.scheduler.fail_start(
                    f"{exc}; nothing more ran. Fix it, then continue with: "
                    f"effectbench run --resume {self.scheduler.run_dir}"
                )
                group.cancel()
                return
            except self.killed:
                # nothing of these was written: run them again on fresh systems of record
                log.warning("episodes.worker_lost", episodes=len(chunk))
                lost += 1
                continue
            except self.cut:
                # the client lost the scheduler: submit again once it is back (the watch
                # ends the run if it does not come back within the worker timeout)
                await self._reconnected()
                continue
            finally:
                self.inflight.discard(future)
            with anyio.CancelScope(shield=True):  # written whole: a lost cluster takes none of it
                del self.held[slot]
                for spec, slim in zip(chunk, done, strict=True):
                    await self.scheduler.record_episode(*_fill(spec, slim, self.scheduler))
            return
        with anyio.CancelScope(shield=True):
            del self.held[slot]
            for spec in chunk:
                await self._lost(spec)

    async def _reconnected(self) -> None:
        while self.client.status != "running":
            await anyio.sleep(POLL_S)

    async def _lost(self, spec: EpisodeSpec) -> None:
        ep = spec.episode_id
        await self.scheduler.record_episode(
            [
                (EpisodePlanned.TYPE, self.scheduler.planned_data(spec), ep, None),
                (
                    EpisodeFailed.TYPE,
                    {
                        "failure_class": FailureClass.UNKNOWN.value,
                        "stage": "harness",
                        "error": f"the Dask worker running it was lost {MAX_LOST + 1} times",
                    },
                    ep,
                    None,
                ),
            ],
            EpisodeOutcome(spec, FailureClass.UNKNOWN),
        )

    async def stop(self) -> None:
        """Cancel what is still in flight (an interrupted run), then stop every worker's
        provider."""
        if self.loss is not None:  # nothing to cancel or stop that can still answer
            return
        if self.inflight:
            await self.client.cancel(list(self.inflight))
        limit = self.scheduler.options.teardown_timeout
        with anyio.move_on_after(limit + 5.0):
            try:
                errors = await self.client.run(stop_on_worker, self.scheduler.run_id, limit)
            except Exception as exc:  # noqa: BLE001 - a stop failure must not hide the run's result
                log.error("provider.stop_failed", error=f"{type(exc).__name__}: {exc}")
                return
            for worker, error in sorted(errors.items()):
                if error is not None:
                    log.error("provider.stop_failed", worker=worker, error=error)
