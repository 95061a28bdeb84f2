"""Run a plan's episodes concurrently and record every step as an event.

The scheduler writes nothing but events. Each episode runs in its own task under a
capacity limiter, in plan order; whatever goes wrong inside one episode becomes that
episode's ``episode.failed`` event with a failure class, and the run goes on. Scoring,
results and metrics are projections over the log, built after the run.

Failure classes (metrics backlog P0):

- ``agent``: the arm raised, or ran past the per-episode timeout;
- ``environment``: provisioning, teardown or another provider error;
- ``evaluation``: the oracle stayed unreadable after its bounded re-reads;
- ``skipped``: the provider declined the episode on purpose (``SkipEpisode``);
- ``unknown``: anything else (a harness fault we cannot attribute).

Cancellation (Ctrl-C) is never an episode failure: an interrupted episode simply has
no terminal event, and resume abandons it and runs it again on a fresh system of record.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

import anyio
import anyio.lowlevel
import attrs
import orjson
import structlog

from effectbench.core import bounds
from effectbench.core.agentlog import LogBudget, LogBudgetExceeded
from effectbench.core.arm import Arm, TaskView
from effectbench.core.capabilities import ArmCapabilities, ProviderCapabilities
from effectbench.core.codec import converter
from effectbench.core.errors import EffectBenchError
from effectbench.core.events import (
    ArmAction,
    ArmScreenshot,
    ArmStarted,
    ArmTelemetry,
    EpisodeAbandoned,
    EpisodeFailed,
    EpisodeFinished,
    EpisodePlanned,
    EpisodeProvisioned,
    Injected,
    PostRead,
    PreSnapshot,
    Reported,
    RunFinished,
    RunResumed,
    RunStarted,
    event_data,
)
from effectbench.core.model import AgentReport, FailureClass, Snapshot
from effectbench.core.prices import price_calls
from effectbench.core.provider import (
    ActionRecord,
    BenchmarkProvider,
    ModelCall,
    Oracle,
    ProvisionedEpisode,
    SkipEpisode,
    Telemetry,
)
from effectbench.core.rundir import LOG_FILE, RunDir
from effectbench.core.services import Service, ServiceLoss
from effectbench.run import statedir, storage
from effectbench.run.health import Health
from effectbench.run.mutate import run_mutations, wants_mutations
from effectbench.run.options import DEFAULT_OPTIONS, RunOptions
from effectbench.run.plan import RESOLVE_CACHE_MAX, EpisodeSpec, Plan, count_planned, episodes
from effectbench.run.resume import ResumeError, ResumeState, load_resume_state
from effectbench.run.runlock import log_lock, run_lock_held, share_run_lock
from effectbench.run.twin import reference_program, run_twin

if TYPE_CHECKING:
    from effectbench.browser.cdp_proxy import CdpEpisode
    from effectbench.browser.lifecycle import RunBrowsers
    from effectbench.browser.pool import EpisodeBrowser

_T = TypeVar("_T")

log = structlog.get_logger("effectbench.run.scheduler")

LOG_NAME = LOG_FILE  # the old name, kept: api.py and in-flight branches import it


SchedulerOptions = RunOptions
"""The old name of the run's options (effectbench.run.options)."""


@attrs.frozen
class EpisodeOutcome:
    """What one episode of this session came to, for progress display (not for scoring)."""

    spec: EpisodeSpec
    failure_class: FailureClass | None
    report: AgentReport | None = None
    pre: Snapshot | None = None
    post: Snapshot | None = None


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


_ARM_REASON_MAX: Final = 5_120
"""An arm's failure reason may be longer than other errors: a protocol agent's carries
the last 4 KiB of its stderr (the real error, not only its last line)."""


def _one_line(exc: BaseException, limit: int = 500) -> str:
    text = " ".join(str(exc).split())
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _snapshot_data(snapshot: Snapshot) -> dict[str, Any]:
    data: dict[str, Any] = converter.unstructure(snapshot)
    return data


def _sum_known(values: Iterable[float | int | None]) -> Any:
    """Sum when every value is known; None when any is missing (never a partial zero)."""
    total: float | int = 0
    any_value = False
    for v in values:
        if v is None:
            return None
        total += v
        any_value = True
    return total if any_value else None


def _bounded_calls(calls: Sequence[ModelCall]) -> tuple[list[ModelCall], str | None]:
    """The calls whose numbers are in range (core/bounds.py) and the first problem of
    one that is not: an arm that reports such a number fails its episode."""
    kept: list[ModelCall] = []
    problem: str | None = None
    for c in calls:
        why = bounds.call_problem(c.input_tokens, c.output_tokens, c.cost_usd, c.latency_ms)
        if why is None:
            kept.append(c)
        elif problem is None:
            problem = why
    return kept, problem


def _over_budget(budget: LogBudget, report: AgentReport) -> str | None:
    """Charge the report's message to the episode's log budget; why the episode is past
    its budget (also when the arm caught the recorder's refusal), else None."""
    if budget.exceeded is None:
        with contextlib.suppress(LogBudgetExceeded):
            budget.charge(len(str(report.message).encode("utf-8", "replace")), "its report")
    return None if budget.exceeded is None else budget.exceeded.removeprefix("the arm ")


def _injections(provisioned: ProvisionedEpisode) -> Sequence[ActionRecord]:
    """The provider's injection records; a broken source becomes one record saying so."""
    source = provisioned.injections
    if source is None:
        return ()
    try:
        return list(source())
    except Exception as exc:  # noqa: BLE001 - provider code: its evidence is lost, the episode is not
        return [ActionRecord("injections_unavailable", {"error": _one_line(exc)})]


def _action_count(n_actions: int, counts_actions: bool) -> int | None:
    """An arm's action count: null (no source) unless it recorded one or declares that it
    records every action it takes (``records_actions``), the rule of the model fields."""
    return n_actions if n_actions or counts_actions else None


def _telemetry_data(
    calls: Sequence[ModelCall],
    n_actions: int | None,
    counts_model: bool = False,
    failed: bool = False,
) -> dict[str, Any]:
    """The episode.telemetry event. ``actions`` is the count :func:`_action_count` gives;
    the model fields are null unless the arm made a call or declares that it counts them
    (``uses_model``), when none counted is 0 (docs/metrics.md). An arm that ``failed``
    (raised, timed out) may have died inside a call whose usage nobody reported: its
    tokens and cost are null, never a sum that leaves that call out nor a made-up 0."""
    if not calls and counts_model:
        return {
            "model_calls": 0,
            "input_tokens": None if failed else 0,
            "output_tokens": None if failed else 0,
            "cost_usd": None if failed else 0.0,
            "actions": n_actions,
            "model_latency_ms": 0.0,
            "cost_source": None if failed else "arm",
            "model_call_latency_ms": [],
        }
    known = not failed
    data: dict[str, Any] = {
        "model_calls": len(calls) if calls else None,
        "input_tokens": _sum_known(c.input_tokens for c in calls) if known else None,
        "output_tokens": _sum_known(c.output_tokens for c in calls) if known else None,
        "cost_usd": _sum_known(c.cost_usd for c in calls) if known else None,
        "actions": n_actions,
    }
    if calls:  # only then, so a log without model calls keeps its bytes
        data["model_latency_ms"] = _sum_known(c.latency_ms for c in calls)
        sources = sorted({c.cost_source for c in calls if c.cost_source is not None})
        data["cost_source"] = None if data["cost_usd"] is None else "+".join(sources) or None
        data["model_call_latency_ms"] = [c.latency_ms for c in calls]
    return data


def _store_screenshot(run_dir: Path, png: Any, label: Any) -> dict[str, Any]:
    from effectbench.core.evidence import screenshot_event

    return screenshot_event(run_dir, bytes(png), str(label))


def _typed(event: Any) -> tuple[str, dict[str, Any]]:
    """(type, data) of a typed event of effectbench.core.events: the only way the
    scheduler writes a line, whether to its own log or to an executor's buffer."""
    return event.TYPE, event_data(event)


def _json_safe(detail: Mapping[str, Any]) -> dict[str, Any]:
    """An action's detail as JSON scalars; anything else becomes its repr, so one odd
    value from an arm cannot break the log writer."""
    out: dict[str, Any] = {}
    for k, v in detail.items():
        out[str(k)] = v if v is None or isinstance(v, (str, int, float, bool)) else repr(v)
    return out


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


async def _reraise_if_stopping() -> None:
    """Called on a caught cancellation: raise again when the run (or its caller) is really
    being cancelled; return when plugin code raised a CancelledError of its own (e.g. it
    awaited a task it had cancelled), which is then that episode's failure alone. Left
    alone, such a stray cancellation would cancel the task group and every other episode."""
    await anyio.lowlevel.checkpoint_if_cancelled()


def _environment_gone(provisioned: ProvisionedEpisode) -> tuple[str, str] | None:
    """(stage, reason) when what the episode ran on died under the arm: its browser
    (Chromium crashed or was killed) or its own service (the provider's ``gone``)."""
    page = provisioned.env.browser
    if page is not None:
        browser = page.context.browser
        if page.is_closed() or (browser is not None and not browser.is_connected()):
            return "browser", "the episode's Chromium died (its page or browser is gone)"
    check = provisioned.gone
    if check is not None:
        try:
            reason = check()
        except Exception as exc:  # noqa: BLE001 - provider code: it cannot tell
            log.debug("provider.gone_failed", error=_one_line(exc))
            return None
        if reason is not None:
            return "service", str(reason)
    return None


def _services(provider: BenchmarkProvider) -> Sequence[Service]:
    """The services a started provider lets the harness watch (its optional
    ``services()``); a provider without the hook has none."""
    hook = ProviderCapabilities.of(provider).services
    return list(hook()) if hook is not None else []


class _Episode(Exception):
    """Internal: an episode stage failed with a known class."""

    def __init__(self, failure_class: FailureClass, stage: str, error: str) -> None:
        super().__init__(error)
        self.failure_class = failure_class
        self.stage = stage
        self.error = error


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
        self._emit: Callable[[str, Mapping[str, Any], str | None], Awaitable[None]] | None = None
        self._finished = 0
        self._failed = 0
        self._start_error: ProviderStartError | None = None
        self._storage_lost: OSError | None = None
        """The first error of the harness's own storage (run/storage.py): the run stops."""
        self._work: anyio.CancelScope | None = None
        self.state_root: Path | None = None
        """This session's per-run state root (effectbench.run.statedir), while it runs."""
        self._provider_errors: dict[str, int] = {}
        self._effects: dict[tuple[str, int], tuple[dict[str, Any], str]] = {}
        self._started = 0
        self._all_started = False
        self._caps = {n: ArmCapabilities.of(a) for n, a in arms.items()}
        """Each arm's optional members, read once (effectbench.core.capabilities)."""
        self._browser_arms = frozenset(n for n, c in self._caps.items() if c.uses_browser)
        self._cdp_arms = frozenset(n for n, c in self._caps.items() if c.uses_browser_cdp)
        self._browsers: RunBrowsers | None = None
        """The run's browsers while its episodes run (effectbench.browser.lifecycle)."""
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
            emit = writer.emit
            self._emit = emit
            self._writer = writer
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
                                await self.executor.run_all(self, pending)
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
                self._emit = None
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
        where there is no run to stop (an episode run on a Dask worker)."""
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
        try:
            self._browsers = await stack.enter_async_context(browsers)
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
                f"provider {self.provider.name!r} failed to start: {_one_line(exc)}; nothing ran. "
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
                for service in _services(self.provider):
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
                    log.error("provider.stop_failed", error=_one_line(exc))
            if scope.cancelled_caught:  # else a hung stop would hang Ctrl-C, which it ignores
                log.error("provider.stop_failed", error=f"did not finish within {limit:g}s")
            self._report_repeated_provider_errors()

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

    # ---- executor seam: what effectbench.executors needs to run episodes elsewhere ----

    def bind_emit(
        self, emit: Callable[[str, Mapping[str, Any], str | None], Awaitable[None]] | None
    ) -> None:
        """Route this scheduler's episode events to ``emit`` (a worker buffers them)."""
        self._emit = emit

    async def run_episode(self, spec: EpisodeSpec) -> None:
        """One whole episode, exactly as the local path runs it, into the bound emit."""
        await self._episode(spec)

    def planned_data(self, spec: EpisodeSpec) -> dict[str, Any]:
        return event_data(self._planned(spec))

    def fail_start(self, message: str) -> None:
        """The provider could not start (on a worker): end the run as a failed start does."""
        if self._start_error is None:
            self._start_error = ProviderStartError(message)

    def note_started(self, *, all_started: bool = False) -> None:
        if all_started:
            self._all_started = True
        else:
            self._started += 1

    async def record_episode(
        self,
        entries: Sequence[tuple[str, Mapping[str, Any], str | None, float | None]],
        outcome: EpisodeOutcome,
    ) -> None:
        """Write a whole episode that ran elsewhere (its events keep their timestamps)."""
        await self.write_events(entries)
        if outcome.failure_class is None:
            self._finished += 1
        else:
            self._failed += 1
        if self.observer is not None:
            self.observer.episode_done(outcome)

    async def write_events(
        self, entries: Sequence[tuple[str, Mapping[str, Any], str | None, float | None]]
    ) -> None:
        """Write events as they are (a ts of None: the writer's clock); an episode that a
        lost service took (planned, then abandoned) counts as neither finished nor failed,
        so ``--resume`` runs it again."""
        emit = self._writer.emit
        for type_, data, ep, ts in entries:
            await emit(type_, data, ep, ts)

    # ---- end of the executor seam ----

    async def _episode_slot(
        self, spec: EpisodeSpec, limiter: anyio.CapacityLimiter, token: object
    ) -> None:
        try:
            await self._episode(spec)
        finally:
            limiter.release_on_behalf_of(token)

    def _planned(self, spec: EpisodeSpec) -> EpisodePlanned:
        task = spec.task
        key = (task.task_id, spec.trial)
        cached = self._effects.get(key)
        if cached is None:  # every arm of a (task, trial) shares one resolved effect
            effect = converter.unstructure(spec.effect)
            # the same bytes hashing.content_hash(effect) hashes, without unstructuring twice
            digest = hashlib.sha256(orjson.dumps(effect, option=orjson.OPT_SORT_KEYS)).hexdigest()
            cached = (effect, digest)
            if len(self._effects) < RESOLVE_CACHE_MAX:  # bounded: memory flat in the plan size
                self._effects[key] = cached
        effect, digest = cached
        return EpisodePlanned(
            arm=spec.arm,
            task_id=task.task_id,
            trial=spec.trial,
            params=dict(spec.params),
            category=task.category.value,
            substrate=task.substrate.value,
            split=task.split.value,
            reversible=task.reversible,
            effect_declared=task.effect_declared,
            correct_action_available=task.correct_action_available,
            effect=effect,
            effect_hash=digest,
        )

    async def _episode(self, spec: EpisodeSpec) -> None:
        """One episode; one that the harness's own storage cut off ends with no event."""
        try:
            await self._episode_events(spec)
        except Exception as exc:
            lost = storage.storage_cause(exc)
            if lost is None or not self._stop_for_storage(lost):
                raise

    async def _episode_events(self, spec: EpisodeSpec) -> None:
        emit = self._emit
        assert emit is not None
        ep = spec.episode_id
        await self.health.ready()  # a service coming back: start on the new one
        since = self.health.deaths
        await emit(*_typed(self._planned(spec)), ep)
        outcome = EpisodeOutcome(spec, FailureClass.UNKNOWN)
        failure: _Episode | None = None
        provisioned: ProvisionedEpisode | None = None
        browser: EpisodeBrowser | None = None
        cdp: CdpEpisode | None = None
        try:
            provisioned = await self._provision(spec)
            if spec.arm in self._browser_arms:
                browser = await self._open_browser(spec)
                provisioned = attrs.evolve(
                    provisioned, env=attrs.evolve(provisioned.env, browser=browser.page)
                )
            if spec.arm in self._cdp_arms:
                cdp = await self._open_cdp(provisioned.env.channels)
                provisioned = attrs.evolve(
                    provisioned, env=attrs.evolve(provisioned.env, browser_cdp=cdp.url)
                )
            outcome = await self._drive(spec, provisioned)
        except _Episode as exc:
            failure = exc
        except anyio.get_cancelled_exc_class() as exc:
            try:  # the run is stopping: no terminal event, resume reruns it
                await _reraise_if_stopping()
            except BaseException:
                if self.health.deaths > since:  # stopped by a lost service: counted against it
                    self.health.abandoned(since)
                raise
            failure = _Episode(FailureClass.UNKNOWN, "harness", _one_line(exc))
        except Exception as exc:  # a harness fault: never stop the run for it, but for storage
            if storage.storage_cause(exc) is not None:
                raise  # the harness's storage: not the episode's failure (_episode)
            failure = _Episode(FailureClass.UNKNOWN, "harness", _one_line(exc))
        finally:
            if browser is not None:  # the context goes first: its page talks to the product
                browser_error = await self._close_browser(browser)
                if browser_error is not None and failure is None:
                    failure = _Episode(FailureClass.ENVIRONMENT, "browser", browser_error)
            if cdp is not None:
                browser_error = await self._close_cdp(cdp)
                if browser_error is not None and failure is None:
                    failure = _Episode(FailureClass.ENVIRONMENT, "browser", browser_error)
            if provisioned is not None:
                teardown_error = await self._teardown(provisioned)
                if teardown_error is not None and failure is None:
                    failure = _Episode(FailureClass.ENVIRONMENT, "teardown", teardown_error)
        if self.health.deaths > since:  # a service it ran on died meanwhile: never scored
            loss = self.health.losses[since]
            await emit(
                *_typed(
                    EpisodeAbandoned(f"{loss.service} died while it ran; resume runs it again")
                ),
                ep,
            )
            self.health.abandoned(since)
            return
        if failure is None:
            await emit(*_typed(EpisodeFinished()), ep)
            self._finished += 1
        else:
            await emit(
                *_typed(EpisodeFailed(failure.failure_class, failure.stage, failure.error)), ep
            )
            self._failed += 1
            outcome = attrs.evolve(outcome, failure_class=failure.failure_class)
        if self.observer is not None:
            self.observer.episode_done(outcome)

    def _provider_error(self, exc: Exception) -> None:
        """The first occurrence of each distinct provider error goes to stderr with its
        traceback (the log keeps only the one-line reason); later ones are counted."""
        reason = _one_line(exc)
        seen = self._provider_errors.get(reason, 0)
        self._provider_errors[reason] = seen + 1
        if not seen:
            log.error("provider.error", phase="provision", error=reason, exc_info=exc)

    def _report_repeated_provider_errors(self) -> None:
        for reason, n in self._provider_errors.items():
            if n > 1:
                log.error(f"provider error {reason!r} occurred {n - 1} more time(s)")

    async def _provision(self, spec: EpisodeSpec) -> ProvisionedEpisode:
        emit = self._emit
        assert emit is not None
        t0 = time.perf_counter()
        limit = self.options.provider_timeout
        provisioned: object = None
        try:
            with anyio.move_on_after(self.options.provider_timeout) as scope:
                provisioned = await self.provider.provision(spec.task, spec.trial, spec.params)
        except SkipEpisode as exc:
            raise _Episode(FailureClass.SKIPPED, "provision", _one_line(exc)) from exc
        except Exception as exc:
            self._provider_error(exc)
            raise _Episode(FailureClass.ENVIRONMENT, "provision", _one_line(exc)) from exc
        if scope.cancelled_caught:
            raise _Episode(
                FailureClass.ENVIRONMENT, "provision", f"provision did not finish within {limit:g}s"
            )
        if not isinstance(provisioned, ProvisionedEpisode):
            raise _Episode(
                FailureClass.ENVIRONMENT,
                "provision",
                f"provider returned {type(provisioned).__name__}, not a ProvisionedEpisode",
            )
        setup_ms = (time.perf_counter() - t0) * 1000.0
        await emit(*_typed(EpisodeProvisioned(setup_ms)), spec.episode_id)
        return provisioned

    async def _open_browser(self, spec: EpisodeSpec) -> EpisodeBrowser:
        """A fresh browser context and page for this episode."""
        assert self._browsers is not None
        return await self._open_within(self._browsers.open_page, "browser page")

    async def _open_cdp(self, channels: Mapping[str, str]) -> CdpEpisode:
        """A fresh context and its CDP endpoint for a protocol agent's episode."""
        browsers = self._browsers
        assert browsers is not None
        return await self._open_within(lambda: browsers.open_cdp(channels), "browser context")

    async def _open_within(self, open_: Callable[[], Awaitable[_T]], what: str) -> _T:
        """``open_()`` within the provider timeout; a failure or a timeout is an
        environment failure of the episode (stage ``browser``)."""
        limit = self.options.provider_timeout
        opened: _T | None = None
        try:
            with anyio.move_on_after(limit):
                opened = await open_()
        except Exception as exc:
            raise _Episode(FailureClass.ENVIRONMENT, "browser", _one_line(exc)) from exc
        if opened is None:
            raise _Episode(FailureClass.ENVIRONMENT, "browser", f"no {what} within {limit:g}s")
        return opened

    async def _close_cdp(self, episode: CdpEpisode) -> str | None:
        """Always runs: the context goes even when the agent failed or timed out."""
        try:
            if self._browsers is not None:
                await self._browsers.close_cdp(episode)
        except Exception as exc:  # noqa: BLE001 - the browser's failure, not the arm's
            return _one_line(exc)
        return None

    async def _close_browser(self, browser: EpisodeBrowser) -> str | None:
        """Always runs, even when the arm failed, timed out or the run is being cancelled."""
        try:
            await browser.close()
        except Exception as exc:  # noqa: BLE001 - the browser's failure, not the arm's
            return _one_line(exc)
        return None

    async def _emit_telemetry(self, telemetry: Telemetry, ep: str) -> None:
        """Actions, with the screenshots kept by ``--screenshots`` in between, in order."""
        emit = self._emit
        assert emit is not None
        shots = list(telemetry.screenshots)
        if self.options.screenshots == "none":
            shots = []
        elif self.options.screenshots == "final":
            shots = shots[-1:]
        actions = list(telemetry.actions)
        for i in range(len(actions) + 1):
            for shot in shots:
                if shot.after == i or (i == len(actions) and shot.after > i):
                    data = await anyio.to_thread.run_sync(
                        _store_screenshot, self.run_dir, shot.png, shot.label
                    )
                    await emit(*_typed(ArmScreenshot(**data)), ep)
            if i < len(actions):
                action = actions[i]
                await emit(*_typed(ArmAction(str(action.kind), _json_safe(action.detail))), ep)

    async def _teardown(self, provisioned: ProvisionedEpisode) -> str | None:
        """Always runs, even when the run is being cancelled; bounded by teardown_timeout."""
        limit = self.options.teardown_timeout
        with anyio.CancelScope(shield=True, deadline=anyio.current_time() + limit) as scope:
            try:
                await provisioned.teardown()
            except Exception as exc:  # noqa: BLE001 - provider code: an environment failure
                return _one_line(exc)
        if scope.cancelled_caught:
            return f"teardown did not finish within {limit:g}s"
        return None

    async def _read_oracle(
        self, oracle: Oracle, spec: EpisodeSpec, event: type[PreSnapshot | PostRead], stage: str
    ) -> Snapshot:
        """Read until readable or out of re-reads; every attempt is an event."""
        emit = self._emit
        assert emit is not None
        attempts = 1 + self.options.oracle_retries
        snapshot = Snapshot.unreadable("not read")
        for attempt in range(attempts):
            if attempt:
                await anyio.sleep(self.options.oracle_delay(attempt))
            try:
                with anyio.move_on_after(self.options.provider_timeout) as scope:
                    snapshot = await oracle.read()
                if scope.cancelled_caught:
                    snapshot = Snapshot.unreadable(
                        f"oracle read did not finish within {self.options.provider_timeout:g}s"
                    )
                elif not isinstance(snapshot, Snapshot):
                    snapshot = Snapshot.unreadable(
                        f"oracle returned {type(snapshot).__name__}, not a Snapshot"
                    )
            except Exception as exc:  # noqa: BLE001 - the protocol says return unreadable; treat a raise the same way
                snapshot = Snapshot.unreadable(_one_line(exc))
            await emit(*_typed(event(attempt, _snapshot_data(snapshot))), spec.episode_id)
            if snapshot.readable:
                return snapshot
        raise _Episode(
            FailureClass.EVALUATION,
            stage,
            f"oracle unreadable after {attempts} read(s): {snapshot.error or 'no reason given'}",
        )

    async def _drive(self, spec: EpisodeSpec, provisioned: ProvisionedEpisode) -> EpisodeOutcome:
        emit = self._emit
        assert emit is not None
        ep = spec.episode_id
        pre = await self._read_oracle(provisioned.oracle, spec, PreSnapshot, "pre_snapshot")

        arm = self.arms[spec.arm]
        caps = self._caps[spec.arm]
        env = provisioned.env
        telemetry: Telemetry = env.telemetry
        telemetry.screenshot_policy = self.options.screenshots
        budget = telemetry.log_budget = LogBudget(self.options.agent_log_budget)
        view = TaskView.of(
            spec.task, spec.trial, episode_id=ep, params=spec.params, effect=spec.effect
        )
        await emit(*_typed(ArmStarted()), ep)
        t0 = time.perf_counter()
        arm_error: str | None = None
        report: Any = None
        timeout = self.options.episode_timeout
        limit = anyio.CancelScope(
            deadline=math.inf if timeout is None else anyio.current_time() + timeout
        )
        try:
            with limit:
                report = await arm.run(view, env)
        except anyio.get_cancelled_exc_class() as exc:
            await _reraise_if_stopping()
            arm_error = f"arm {spec.arm!r} raised {_one_line(exc)}"
        except Exception as exc:  # noqa: BLE001 - whatever the arm raises is an agent failure
            arm_error = f"arm {spec.arm!r} raised {_one_line(exc, _ARM_REASON_MAX)}"
        if limit.cancelled_caught:
            arm_error = f"arm {spec.arm!r} ran past the episode timeout of {timeout:g}s"
        wall_ms = (time.perf_counter() - t0) * 1000.0
        if arm_error is None and not isinstance(report, AgentReport):
            arm_error = f"arm {spec.arm!r} returned {type(report).__name__}, not an AgentReport"

        if arm_error is None:
            arm_error = _over_budget(budget, report)
            if arm_error is not None:
                arm_error = f"arm {spec.arm!r} {arm_error}"
        calls, out_of_range = _bounded_calls(telemetry.model_calls)
        if out_of_range is not None and arm_error is None:
            arm_error = f"arm {spec.arm!r} recorded a model call out of range: {out_of_range}"
        await self._emit_telemetry(telemetry, ep)
        for injected in _injections(provisioned):
            await emit(*_typed(Injected(str(injected.kind), _json_safe(injected.detail))), ep)
        await emit(
            *_typed(
                ArmTelemetry(
                    **_telemetry_data(
                        price_calls(calls, self.options.prices),
                        _action_count(len(telemetry.actions), caps.records_actions),
                        counts_model=caps.uses_model,
                        failed=arm_error is not None,
                    )
                )
            ),
            ep,
        )
        gone = _environment_gone(provisioned)
        if gone is not None:  # the arm's trouble, if any, followed from it: not the agent's
            then = f"; then {arm_error}" if arm_error is not None else ""
            raise _Episode(FailureClass.ENVIRONMENT, gone[0], f"{gone[1]}{then}")
        if arm_error is not None:
            raise _Episode(FailureClass.AGENT, "arm", arm_error)
        assert isinstance(report, AgentReport)
        reported = Reported(
            reported_success=bool(report.reported_success),
            halted=bool(report.halted),
            message=str(report.message),
            wall_ms=wall_ms,
        )
        await emit(*_typed(reported), ep)
        post = await self._read_oracle(provisioned.oracle, spec, PostRead, "post_read")
        program = reference_program(spec.effect, self.arms)
        if program is not None:  # a reference-mode diff: its expected diff comes from a twin
            twin_error = await run_twin(self.provider, spec, *program, self.options, emit)
            if twin_error is not None:
                raise _Episode(FailureClass.ENVIRONMENT, "reference", twin_error)
        if caps.mutation_audit and spec.trial == 0 and wants_mutations(spec.task):
            # the audit's reference asks for its oracle to be mutation-tested (run/mutate.py)
            await run_mutations(self.provider, spec, arm, self.options, emit, pre)
        return EpisodeOutcome(spec, None, report, pre, post)


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
