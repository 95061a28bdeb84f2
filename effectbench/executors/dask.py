"""Run episodes on Dask's distributed scheduler; this process stays the log's one writer.

Each episode (provision, pre-snapshot, arm, post-read, teardown) is one Dask task. On
the worker it runs through the same code as a local episode (run/episode.py's runner),
into a buffer instead of the log; the task returns the episode's events, each with the
time it happened, and the harness writes them (assigning seq and hash) only once the
whole episode has returned. So a lost worker leaves nothing of its in-flight episodes in
the log, and they are run again on fresh systems of record, as a resume would.

Dask's own re-runs are off (``allowed_failures`` 0): a task whose worker died fails with
KilledWorker and the harness decides what to do, so no episode can count twice.

On a worker, the provider and arms are built from their entry points (or
``module:attribute`` references) once per worker process and run id, started there
once, and stopped at the end of the run (executors/dask_worker.py). The harness side
sees the run only as an ``EpisodeSink`` (executors/base.py): it never holds the
scheduler.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs
import structlog

from effectbench.core.events import EpisodeAbandoned, EpisodeFailed, EpisodePlanned, event_data
from effectbench.core.model import FailureClass
from effectbench.core.services import ServiceLoss
from effectbench.executors.base import INSTALL_HINT, EpisodeSink, ExecutorError
from effectbench.executors.dask_worker import (
    Done,
    WorkerSetup,
    WorkerStartError,
    run_batch_on_worker,
    stop_on_worker,
)
from effectbench.run.episode import EpisodeOutcome, Line
from effectbench.run.health import Health
from effectbench.run.plan import EpisodeSpec

log = structlog.get_logger("effectbench.executors.dask")

MAX_LOST = 3
"""Times one episode may lose its worker before it is recorded as failed (``unknown``)."""

TASKS_PER_WORKER = 8
"""Batches in flight per worker: enough to keep its event loop busy while results travel."""
MAX_BATCH = 64
CLOSE_TIMEOUT = 30.0
"""Seconds to close the client and a local cluster at the end of a run."""
LOST_CLOSE_TIMEOUT = 5.0
"""The same once the workers or the scheduler were lost: there is nothing left to wait for."""
POLL_S = 1.0
"""How often the harness asks the scheduler which workers are running (at most)."""


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


def _setup(sink: EpisodeSink) -> WorkerSetup:
    refs = sink.plan.refs
    prov_ref = refs.get("provider")
    arm_refs = list(refs.get("arms") or [])
    if (
        not isinstance(prov_ref, str)
        or len(arm_refs) != len(sink.plan.arms)
        or not all(isinstance(r, str) for r in arm_refs)
    ):
        raise ExecutorError(
            "the dask executor builds the provider and arms on each worker, so give them as "
            "entry-point names or module:attribute references, not objects"
        )
    options = attrs.evolve(sink.options, handle_signals=False)
    root = None if sink.state_root is None else str(sink.state_root)
    return WorkerSetup(sink.run_id, sink.plan, prov_ref, tuple(arm_refs), options, state_root=root)


def _fill(
    spec: EpisodeSpec, done: Done, sink: EpisodeSink
) -> tuple[list[Line], EpisodeOutcome | None]:
    entries, slim = done
    if entries and entries[0][0] == EpisodePlanned.TYPE:
        type_, _, ep, ts = entries[0]
        entries[0] = (type_, sink.planned(spec), ep, ts)
    return entries, None if slim is None else EpisodeOutcome(spec, *slim)


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

    async def run_all(self, sink: EpisodeSink, pending: Iterable[EpisodeSpec]) -> None:
        setup = _setup(sink)
        distributed = _import_distributed()
        async with (
            self._client(
                sink.options.concurrency,
                sink.health,
                None if sink.state_root is None else sink.state_root / "dask",
            ) as client,
            _setup_on_workers(client, setup, sink.health) as shared,
        ):
            await client.run_on_scheduler(_no_retries)
            workers = max(1, self.n_workers or len(client.scheduler_info()["workers"]))
            concurrency = sink.options.concurrency
            batch = batch_size(concurrency, workers)
            tasks = max(1, concurrency // batch)
            if self.address is None and local_slots(concurrency, workers) * workers <= tasks:
                # our own workers' slots already bound what runs: one more batch per worker
                # may wait on it, so a freed slot starts the next without a round trip here
                tasks += workers
            run = _HarnessRun(
                sink,
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
    sink: EpisodeSink
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
        limit = self.sink.options.worker_timeout
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
                await self.sink.record(
                    [
                        (EpisodePlanned.TYPE, self.sink.planned(spec), ep, None),
                        (EpisodeAbandoned.TYPE, event_data(EpisodeAbandoned(reason)), ep, None),
                    ]
                )
        self.held.clear()
        self.sink.health.lost(attrs.evolve(self.loss, abandoned=len(held)))

    async def _submit(self, pending: Iterable[EpisodeSpec]) -> None:
        # in flight: at most ``concurrency`` episodes, in tasks of up to ``batch`` each
        limiter = anyio.CapacityLimiter(self.tasks)
        specs = iter(pending)
        async with anyio.create_task_group() as tg:
            while True:
                token = object()
                await limiter.acquire_on_behalf_of(token)
                chunk = [spec for _, spec in zip(range(self.batch), specs, strict=False)]
                if not chunk or self.sink.start_failed:
                    limiter.release_on_behalf_of(token)
                    break
                tg.start_soon(self._slot, chunk, limiter, token, tg.cancel_scope)
                for _ in chunk:
                    self.sink.started()
            if not self.sink.start_failed:
                self.sink.all_started()

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
                self.sink.fail_start(
                    f"{exc}; nothing more ran. Fix it, then continue with: "
                    f"effectbench run --resume {self.sink.run_dir}"
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
                    await self.sink.record(*_fill(spec, slim, self.sink))
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
        await self.sink.record(
            [
                (EpisodePlanned.TYPE, self.sink.planned(spec), ep, None),
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
        limit = self.sink.options.teardown_timeout
        with anyio.move_on_after(limit + 5.0):
            try:
                errors = await self.client.run(stop_on_worker, self.sink.run_id, limit)
            except Exception as exc:  # noqa: BLE001 - a stop failure must not hide the run's result
                log.error("provider.stop_failed", error=f"{type(exc).__name__}: {exc}")
                return
            for worker, error in sorted(errors.items()):
                if error is not None:
                    log.error("provider.stop_failed", worker=worker, error=error)
