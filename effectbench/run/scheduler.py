"""Run a plan's episodes concurrently and record every step as an event.

The scheduler owns a run's lifecycle: the run lock on its log, signals, the opening and
closing events, the per-run state root, the run's browsers (effectbench.browser.lifecycle),
the provider's start and stop, the arms' lifespans, the services' watch and the pending
loop under a capacity limiter, in plan order. Each episode runs through the
:class:`~effectbench.run.episode.EpisodeRunner` (its stages and failure classes) into the
one log writer; an executor that runs episodes elsewhere sees the run only through its
:class:`~effectbench.executors.base.EpisodeSink`. The scheduler writes nothing but
events; scoring, results and metrics are projections over the log, built after the run.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import attrs
import structlog

from effectbench.core.arm import Arm
from effectbench.core.capabilities import ArmCapabilities, ProviderCapabilities
from effectbench.core.errors import EffectBenchError, one_line
from effectbench.core.events import EpisodeAbandoned, RunFinished, RunResumed, RunStarted
from effectbench.core.provider import BenchmarkProvider
from effectbench.core.rundir import LOG_FILE, RunDir
from effectbench.core.services import ServiceLoss
from effectbench.run import statedir, storage
from effectbench.run.episode import EpisodeOutcome, EpisodeRunner, Line
from effectbench.run.episode_events import PlannedEvents
from effectbench.run.health import Health, services_of
from effectbench.run.options import DEFAULT_OPTIONS, RunOptions
from effectbench.run.plan import EpisodeSpec, Plan, count_planned, episodes
from effectbench.run.resume import ResumeError, ResumeState, load_resume_state
from effectbench.run.runlock import log_lock, run_lock_held, share_run_lock

log = structlog.get_logger("effectbench.run.scheduler")

LOG_NAME = LOG_FILE  # the old name, kept: api.py and in-flight branches import it


SchedulerOptions = RunOptions
"""The old name of the run's options (effectbench.run.options)."""


class Observer(Protocol):
    def run_planned(self, plan: Plan, total: int, already_done: int) -> None: ...

    def episode_done(self, outcome: EpisodeOutcome) -> None: ...


@attrs.frozen
class RunOutcome:
    run_id: str
    interrupted: bool
    signal: int | None
    planned: int
    kept: int
    abandoned: int
    finished: int
    failed: int
    final_hash: str = ""
    """The chain hash of the last line this run wrote: what its log's readers must see."""
    lost: tuple[ServiceLoss, ...] = ()
    """Harness-owned services that died during the run (ExitCode.SERVICE_LOST)."""


class ProviderStartError(EffectBenchError):
    """The provider's run-level start failed; the log is closed and resumable."""


@contextlib.contextmanager
def _exclusive(log_path: Path) -> Iterator[int]:
    """Hold the run lock (run/runlock.py) for the run, so two processes never write (or
    resume) one run directory at once, and --force never replaces a live one
    (effectbench.run.outdir probes this lock). Yields the locked descriptor."""
    with log_lock(log_path, exclusive=True, flags=os.O_RDWR | os.O_CREAT) as lock:
        if lock.error is not None:
            raise ResumeError(f"cannot open {log_path}: {lock.error.strerror or lock.error}")
        if not lock.held:
            raise ResumeError(
                f"{log_path.parent} is in use by another effectbench process; wait for it or "
                "stop it first"
            )
        yield lock.fd


class Scheduler:
    """One run (or one resumed continuation of a run) over one log file."""

    def __init__(
        self,
        plan: Plan,
        provider: BenchmarkProvider,
        arms: Mapping[str, Arm],
        run_dir: Path,
        *,
        run_id: str,
        options: RunOptions = DEFAULT_OPTIONS,
        observer: Observer | None = None,
        executor: Any = None,
    ) -> None:
        missing = [a for a in plan.arms if a not in arms]
        if missing:
            raise ValueError(f"no arm instance for {', '.join(missing)}")
        self.plan = plan
        self.provider = provider
        self.arms = arms
        self.run_dir = run_dir
        self.run_id = run_id
        self.options = options
        self.observer = observer
        self._finished = 0
        self._failed = 0
        self._start_error: ProviderStartError | None = None
        self._storage_lost: OSError | None = None
        """The first error of the harness's own storage (run/storage.py): the run stops."""
        self._work: anyio.CancelScope | None = None
        self.state_root: Path | None = None
        """This session's per-run state root (effectbench.run.statedir), while it runs."""
        self._planned = PlannedEvents()
        """The planned event of each spec, shared by the runner and an executor's sink."""
        self._runner: EpisodeRunner | None = None
        """Runs this session's episodes into its log, while the log is open."""
        self._started = 0
        self._all_started = False
        self._caps = {n: ArmCapabilities.of(a) for n, a in arms.items()}
        """Each arm's optional members, read once (effectbench.core.capabilities)."""
        self._browser_arms = frozenset(n for n, c in self._caps.items() if c.uses_browser)
        self._cdp_arms = frozenset(n for n, c in self._caps.items() if c.uses_browser_cdp)
        self._writer: Any = None
        self.executor = executor
        """Where episodes run (effectbench.executors); None runs them here, as always."""
        self.health = Health()
        """The run's watch over the services it owns (effectbench.run.health)."""

    @property
    def log_path(self) -> Path:
        return RunDir(self.run_dir).log

    async def run(
        self,
        resume: ResumeState | None = None,
        *,
        finish: Callable[[], Awaitable[None]] | None = None,
    ) -> RunOutcome:
        """Run every pending episode; with ``resume``, continue that log instead of starting one.

        ``finish`` (building the artifacts) runs after an uninterrupted run, still under the
        lock. Before and after it, the log at the path must still be the file this run
        wrote, else RunDirLost: a replaced directory holds another run's log."""
        from effectbench.run.outdir import check_still_ours

        # Signals are received from before the log exists: a Ctrl-C while the run sets up
        # waits in the receiver until the work starts (which it then cancels at once),
        # never a native cancel of the main task that a shielded setup step could swallow.
        with contextlib.ExitStack() as watching:
            signals = (
                watching.enter_context(anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM))
                if self.options.handle_signals
                else None
            )
            with _exclusive(self.log_path) as fd:
                try:
                    outcome = await self._run_locked(resume, signals)
                    watching.close()  # while the artifacts are built, Ctrl-C is the default one
                    check_still_ours(fd, self.log_path)
                    if finish is not None and not outcome.interrupted:
                        try:
                            await finish()
                        finally:  # a log removed mid-build is reported as that, not a build error
                            check_still_ours(fd, self.log_path)
                except Exception as exc:
                    lost = storage.storage_cause(exc)
                    if lost is None or isinstance(exc, storage.StorageError):
                        raise
                    raise storage.StorageError(self.run_dir, lost) from exc
        return outcome

    async def _run_locked(self, resume: ResumeState | None, signals: Any) -> RunOutcome:
        kept = resume.terminated if resume else frozenset()
        abandoned = resume.unterminated if resume else ()
        # A generator, never a list: a plan of millions costs no memory and no setup time.
        pending = (s for s in episodes(self.plan) if s.episode_id not in kept)
        caught: list[int] = []
        seed = getattr(self.observer, "resumed", None)
        if resume is not None and callable(seed):  # live figures count the kept episodes too
            seed(self.log_path, kept)

        return await self._run_logged(resume, signals, caught, kept, abandoned, pending)

    async def _run_logged(
        self,
        resume: ResumeState | None,
        signals: Any,
        caught: list[int],
        kept: frozenset[str],
        abandoned: Sequence[str],
        pending: Iterator[EpisodeSpec],
    ) -> RunOutcome:
        from effectbench.log.reader import open_log_writer

        total = self.plan.n_episodes
        interrupted = False
        async with open_log_writer(self.log_path, append=resume is not None) as writer:
            if resume is not None and resume.events >= 0 and writer.count != resume.events:
                raise ResumeError(
                    f"{self.log_path} changed after it was read ({resume.events} events, now "
                    f"{writer.count}): another effectbench process wrote to it; resume again"
                )
            self._writer = writer
            self._runner = EpisodeRunner(
                self.provider,
                self.arms,
                self._caps,
                self.options,
                self.run_dir,
                writer.emit,
                self.health,
                self._planned,
            )
            if resume is None:
                await writer.emit_event(
                    RunStarted(
                        run_id=self.run_id,
                        plan=self.plan.to_json(),
                        plan_hash=self.plan.plan_hash,
                        versions=dict(self.plan.versions),
                        concurrency=self.options.concurrency,
                        **self._execution(),
                        min_coverage=self.options.min_coverage,
                        from_provider=self.options.from_provider() or None,
                    )
                )
            else:
                for ep in abandoned:
                    await writer.emit_event(
                        EpisodeAbandoned(
                            "started before an interruption without a terminal event; run again"
                        ),
                        ep,
                    )
                await writer.emit_event(
                    RunResumed(
                        plan_hash=self.plan.plan_hash,
                        kept=len(kept),
                        abandoned=len(abandoned),
                        concurrency=self.options.concurrency,
                        **self._execution(),
                        min_coverage=self.options.min_coverage,
                        from_provider=self.options.from_provider() or None,
                    )
                )
            if self.observer is not None:
                self.observer.run_planned(self.plan, total, count_planned(self.plan, kept))

            try:
                async with anyio.create_task_group() as outer:
                    with anyio.CancelScope() as work:
                        self.health.on_fatal(work.cancel)
                        self._work = work
                        if signals is not None:
                            outer.start_soon(self._watch_signals, signals, work, caught)
                        with statedir.claimed(self.run_id, self.run_dir) as root:
                            self.state_root = root
                            if self.executor is None:
                                await self._run_all(pending)
                            else:
                                await self.executor.run_all(_Sink(self), pending)
                    # Interrupted means an episode of this session has no terminal event, for
                    # whatever reason; a signal after the last episode ended interrupts nothing.
                    done = self._finished + self._failed
                    interrupted = (
                        self._start_error is not None
                        or not self._all_started
                        or done < self._started
                    )
                    outer.cancel_scope.cancel()
            except BaseException:
                interrupted = True
                raise
            finally:
                self._work = None
                with anyio.CancelScope(shield=True):
                    await self._emit_run_finished(writer, interrupted)
                self._runner = None
        if self._start_error is not None:
            raise self._start_error
        if self._storage_lost is not None:
            raise storage.StorageError(self.run_dir, self._storage_lost)
        return RunOutcome(
            run_id=self.run_id,
            interrupted=interrupted,
            signal=caught[0] if caught else None,
            planned=total,
            kept=len(kept),
            abandoned=len(abandoned),
            finished=self._finished,
            failed=self._failed,
            final_hash=writer.last_hash,
            lost=self.health.losses,
        )

    async def _emit_run_finished(self, writer: Any, interrupted: bool) -> None:
        """The session's last event; not attempted again once the harness's storage failed
        (the log may be the file that cannot be written: the run stops without it)."""
        event = RunFinished(
            interrupted=interrupted,
            episodes_finished=self._finished,
            episodes_failed=self._failed,
        )
        try:
            await writer.emit_event(event)
        except Exception as exc:
            lost = storage.storage_cause(exc)
            if lost is None:
                raise
            self._storage_lost = self._storage_lost or lost

    def _stop_for_storage(self, lost: OSError) -> bool:
        """The harness's storage failed in an episode: remember the first error and stop
        the run (its episodes in flight get no terminal event: resume reruns them). False
        where there is no run to stop (its work scope is already gone)."""
        if self._work is None:
            return False
        if self._storage_lost is None:
            self._storage_lost = lost
        self._work.cancel()
        return True

    def _execution(self) -> dict[str, Any]:
        """How each arm runs (``in_process``, ``subprocess``, ``isolated``) and, when a
        protocol agent could not be contained, why: the manifest records both."""
        caps = {a: self._caps[a] for a in self.plan.arms}
        modes = {a: c.execution for a, c in caps.items()}
        notes = {c.execution_note for c in caps.values()}
        data: dict[str, Any] = {"execution": modes}
        if notes - {None}:
            data["containment"] = "; ".join(sorted(str(n) for n in notes if n is not None))
        return data

    async def _watch_signals(
        self, signals: Any, work: anyio.CancelScope, caught: list[int]
    ) -> None:
        """The first SIGINT/SIGTERM cancels ``work``; ``signals`` (anyio's receiver, opened
        before the log) holds any that came during setup."""
        async for signum in signals:
            if not caught:
                caught.append(int(signum))
                log.warning("run.interrupt", signal=signal.Signals(signum).name)
                work.cancel()
            # later signals: already stopping; keep the handler so the log closes cleanly

    async def _run_all(self, pending: Iterable[EpisodeSpec]) -> None:
        async with contextlib.AsyncExitStack() as browsers:
            if not await self._enter_browsers(browsers):
                return
            hand_over = ProviderCapabilities.of(self.provider).use_state_dir
            if hand_over is not None and self.state_root is not None:
                hand_over(self.state_root)  # the per-run root for episode state (run/statedir.py)
            await self._run_provider(pending)

    async def _enter_browsers(self, stack: contextlib.AsyncExitStack) -> bool:
        """The run's browsers (effectbench.browser.lifecycle) when an arm needs one, for
        as long as ``stack``; False (and the run's start error set) when they cannot start.
        A run without browser arms does not even import the browser package."""
        if not (self._browser_arms or self._cdp_arms):
            return True
        from effectbench.browser.lifecycle import BrowserStartError, run_browsers

        browsers = run_browsers(
            pages_for=self._browser_arms,
            cdp_for=self._cdp_arms,
            browsers=self.options.browsers,
            concurrency=self.options.concurrency,
            tmp_dir=None if self.state_root is None else self.state_root / "browser",
        )
        assert self._runner is not None
        try:
            self._runner.browsers = await stack.enter_async_context(browsers)
        except BrowserStartError as exc:  # raised after the log is closed, see run()
            self._start_error = ProviderStartError(
                f"{exc}; nothing ran. Fix it, then continue with: "
                f"effectbench run --resume {self.run_dir}"
            )
            return False
        return True

    async def _run_provider(self, pending: Iterable[EpisodeSpec]) -> None:
        try:
            await self.provider.start()
        except Exception as exc:  # noqa: BLE001 - raised after the log is closed, see run()
            self._start_error = ProviderStartError(
                f"provider {self.provider.name!r} failed to start: {one_line(exc)}; nothing ran. "
                f"Fix it, then continue with: effectbench run --resume {self.run_dir}"
            )
            return
        try:
            remaining = iter(pending)
            first = next(remaining, None)
            if first is None:  # nothing to run: no agent process is started for it
                self._all_started = True
                return
            limiter = anyio.CapacityLimiter(self.options.concurrency)
            async with anyio.create_task_group() as watch:
                for service in services_of(self.provider):
                    watch.start_soon(self.health.watch, service)
                try:
                    # the arms' lifespans open their own task groups: they close inside
                    # the watch's, never after it
                    async with contextlib.AsyncExitStack() as arms:
                        await self._enter_arms(arms)
                        await self._run_pending(itertools.chain((first,), remaining), limiter)
                finally:
                    watch.cancel_scope.cancel()  # before stop(), which ends the services itself
        finally:
            limit = self.options.teardown_timeout
            with anyio.CancelScope(shield=True, deadline=anyio.current_time() + limit) as scope:
                try:
                    await self.provider.stop()
                except Exception as exc:  # noqa: BLE001 - a stop failure must not hide the run's own result
                    log.error("provider.stop_failed", error=one_line(exc))
            if scope.cancelled_caught:  # else a hung stop would hang Ctrl-C, which it ignores
                log.error("provider.stop_failed", error=f"did not finish within {limit:g}s")
            if self._runner is not None:
                self._runner.report_repeated_provider_errors()

    async def _enter_arms(self, stack: contextlib.AsyncExitStack) -> None:
        """Arms with a ``lifespan(run_dir)`` (a long-lived agent process) get it around
        the episodes; an arm without one needs nothing."""
        for name in self.plan.arms:
            lifespan = self._caps[name].lifespan
            if lifespan is not None:
                await stack.enter_async_context(lifespan(self.run_dir))

    async def _run_pending(
        self, pending: Iterable[EpisodeSpec], limiter: anyio.CapacityLimiter
    ) -> None:
        async with anyio.create_task_group() as tg:
            for spec in pending:
                token = object()  # a cheap unique borrower (specs hash by value, slowly)
                await limiter.acquire_on_behalf_of(token)
                tg.start_soon(self._episode_slot, spec, limiter, token)
                self._started += 1
            self._all_started = True

    async def _episode_slot(
        self, spec: EpisodeSpec, limiter: anyio.CapacityLimiter, token: object
    ) -> None:
        try:
            await self._episode(spec)
        finally:
            limiter.release_on_behalf_of(token)

    async def _episode(self, spec: EpisodeSpec) -> None:
        """One episode; one that the harness's own storage cut off ends with no event."""
        runner = self._runner
        assert runner is not None
        try:
            outcome = await runner.run(spec)
        except Exception as exc:
            lost = storage.storage_cause(exc)
            if lost is None or not self._stop_for_storage(lost):
                raise
            return
        if outcome is not None:  # None: abandoned, neither finished nor failed
            self._count(outcome)

    def _count(self, outcome: EpisodeOutcome) -> None:
        if outcome.failure_class is None:
            self._finished += 1
        else:
            self._failed += 1
        if self.observer is not None:
            self.observer.episode_done(outcome)


@attrs.frozen
class _Sink:
    """The run as an executor sees it (effectbench.executors.base.EpisodeSink): what it
    needs to run episodes elsewhere and hand them back whole; the scheduler stays the
    log's one writer and keeps the counts."""

    _run: Scheduler

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def plan(self) -> Plan:
        return self._run.plan

    @property
    def options(self) -> RunOptions:
        return self._run.options

    @property
    def run_dir(self) -> Path:
        return self._run.run_dir

    @property
    def state_root(self) -> Path | None:
        return self._run.state_root

    @property
    def health(self) -> Health:
        return self._run.health

    @property
    def start_failed(self) -> bool:
        return self._run._start_error is not None

    def planned(self, spec: EpisodeSpec) -> dict[str, Any]:
        return self._run._planned.data(spec)

    def started(self) -> None:
        self._run._started += 1

    def all_started(self) -> None:
        self._run._all_started = True

    def fail_start(self, message: str) -> None:
        if self._run._start_error is None:
            self._run._start_error = ProviderStartError(message)

    async def run_here(self, pending: Iterable[EpisodeSpec]) -> None:
        await self._run._run_all(pending)

    async def record(self, entries: Sequence[Line], outcome: EpisodeOutcome | None = None) -> None:
        """Write lines as they are (their ts; None: the writer's clock), then count the
        episode; without an outcome (one a lost service took: planned, then abandoned) it
        counts as neither finished nor failed, so ``--resume`` runs it again."""
        emit = self._run._writer.emit
        for type_, data, ep, ts in entries:
            await emit(type_, data, ep, ts)
        if outcome is not None:
            self._run._count(outcome)


__all__ = [
    "LOG_NAME",
    "EpisodeOutcome",
    "Observer",
    "ProviderStartError",
    "ResumeError",
    "ResumeState",
    "RunOutcome",
    "Scheduler",
    "SchedulerOptions",
    "load_resume_state",
    "run_lock_held",
    "share_run_lock",
]
