"""One episode's stages, from its planned event to its terminal one.

provision, open the arm's browser, pre-read, arm (with its timeout), telemetry,
report, post-read, the reference twin, the mutation audit, teardown; whatever goes wrong
in a stage becomes the episode's ``episode.failed`` with a failure class, and the run
goes on. Failure classes (metrics backlog P0):

- ``agent``: the arm raised, or ran past the per-episode timeout;
- ``environment``: provisioning, teardown or another provider error;
- ``evaluation``: the oracle stayed unreadable after its bounded re-reads;
- ``skipped``: the provider declined the episode on purpose (``SkipEpisode``);
- ``unknown``: anything else (a harness fault we cannot attribute).

Cancellation (Ctrl-C) is never an episode failure: an interrupted episode simply has
no terminal event, and resume abandons it and runs it again on a fresh system of record.
The scheduler runs episodes through an :class:`EpisodeRunner` into its log; a Dask
worker runs the same code into a buffer (effectbench.executors.dask).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
import attrs
import structlog

from effectbench.core.agentlog import LogBudget
from effectbench.core.arm import Arm, TaskView
from effectbench.core.capabilities import ArmCapabilities
from effectbench.core.errors import one_line
from effectbench.core.events import (
    ArmAction,
    ArmScreenshot,
    ArmStarted,
    ArmTelemetry,
    EpisodeAbandoned,
    EpisodeFailed,
    EpisodeFinished,
    EpisodeProvisioned,
    Injected,
    PostRead,
    PreSnapshot,
    Reported,
)
from effectbench.core.model import AgentReport, FailureClass, Snapshot
from effectbench.core.prices import price_calls
from effectbench.core.provider import (
    BenchmarkProvider,
    Oracle,
    ProvisionedEpisode,
    SkipEpisode,
    Telemetry,
)
from effectbench.run import storage
from effectbench.run.episode_events import (
    ARM_REASON_MAX,
    PlannedEvents,
    action_count,
    bounded_calls,
    injections,
    json_safe,
    over_budget,
    snapshot_data,
    store_screenshot,
    telemetry_data,
    typed,
)
from effectbench.run.health import Health
from effectbench.run.mutate import run_mutations, wants_mutations
from effectbench.run.options import RunOptions
from effectbench.run.plan import EpisodeSpec
from effectbench.run.provider_errors import ProviderErrors
from effectbench.run.twin import Emit, reference_program, run_twin

if TYPE_CHECKING:
    from effectbench.browser.cdp_proxy import CdpEpisode
    from effectbench.browser.lifecycle import RunBrowsers
    from effectbench.browser.pool import EpisodeBrowser

__all__ = ["EpisodeOutcome", "EpisodeRunner", "Line"]

_T = TypeVar("_T")

log = structlog.get_logger("effectbench.run.scheduler")  # the name its stderr lines had

Line = tuple[str, Mapping[str, Any], str | None, float | None]
"""One event as an executor hands it back: type, data, episode id and the time it
happened (None: the writer's clock)."""


@attrs.frozen
class EpisodeOutcome:
    """What one episode of this session came to, for progress display (not for scoring)."""

    spec: EpisodeSpec
    failure_class: FailureClass | None
    report: AgentReport | None = None
    pre: Snapshot | None = None
    post: Snapshot | None = None


async def reraise_if_stopping() -> None:
    """Called on a caught cancellation: raise again when the run (or its caller) is really
    being cancelled; return when plugin code raised a CancelledError of its own (e.g. it
    awaited a task it had cancelled), which is then that episode's failure alone. Left
    alone, such a stray cancellation would cancel the task group and every other episode."""
    await anyio.lowlevel.checkpoint_if_cancelled()


def environment_gone(provisioned: ProvisionedEpisode) -> tuple[str, str] | None:
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
            log.debug("provider.gone_failed", error=one_line(exc))
            return None
        if reason is not None:
            return "service", str(reason)
    return None


class _Episode(Exception):
    """Internal: an episode stage failed with a known class."""

    def __init__(
        self, failure_class: FailureClass, stage: str, error: str, traceback: str | None = None
    ) -> None:
        super().__init__(error)
        self.failure_class = failure_class
        self.stage = stage
        self.error = error
        self.traceback = traceback


@attrs.define
class EpisodeRunner:
    """Runs one episode at a time (many at once) of one run into ``emit``. The arms'
    capabilities are the scheduler's record (effectbench.core.capabilities); ``browsers``
    is set while the run's browsers are up (effectbench.browser.lifecycle)."""

    provider: BenchmarkProvider
    arms: Mapping[str, Arm]
    caps: Mapping[str, ArmCapabilities]
    options: RunOptions
    run_dir: Path
    emit: Emit
    health: Health = attrs.Factory(Health)
    planned: PlannedEvents = attrs.Factory(PlannedEvents)
    browsers: RunBrowsers | None = None
    provider_errors: ProviderErrors = attrs.Factory(ProviderErrors)

    async def run(self, spec: EpisodeSpec) -> EpisodeOutcome | None:
        """One whole episode, its terminal event written; what it came to, or None when a
        service it ran on died meanwhile (abandoned: neither finished nor failed)."""
        emit = self.emit
        ep = spec.episode_id
        await self.health.ready()  # a service coming back: start on the new one
        since = self.health.deaths
        await emit(*typed(self.planned.of(spec)), ep)
        outcome = EpisodeOutcome(spec, FailureClass.UNKNOWN)
        failure: _Episode | None = None
        provisioned: ProvisionedEpisode | None = None
        browser: EpisodeBrowser | None = None
        cdp: CdpEpisode | None = None
        try:
            provisioned = await self._provision(spec)
            if self.caps[spec.arm].uses_browser:
                browser = await self._open_browser(spec)
                provisioned = attrs.evolve(
                    provisioned, env=attrs.evolve(provisioned.env, browser=browser.page)
                )
            if self.caps[spec.arm].uses_browser_cdp:
                cdp = await self._open_cdp(provisioned.env.channels)
                camera = self.browsers.camera(cdp) if self.browsers is not None else None
                env = attrs.evolve(provisioned.env, browser_cdp=cdp.url, browser_camera=camera)
                provisioned = attrs.evolve(provisioned, env=env)
            outcome = await self._drive(spec, provisioned)
        except _Episode as exc:
            failure = exc
        except anyio.get_cancelled_exc_class() as exc:
            try:  # the run is stopping: no terminal event, resume reruns it
                await reraise_if_stopping()
            except BaseException:
                if self.health.deaths > since:  # stopped by a lost service: counted against it
                    self.health.abandoned(since)
                raise
            failure = _Episode(FailureClass.UNKNOWN, "harness", one_line(exc))
        except Exception as exc:  # a harness fault: never stop the run for it, but for storage
            if storage.storage_cause(exc) is not None:
                raise  # the harness's storage: not the episode's failure (Scheduler._episode)
            failure = _Episode(FailureClass.UNKNOWN, "harness", one_line(exc))
        finally:
            released = await self._release(browser, cdp, provisioned)
            if failure is None:
                failure = released
        return await self._ended(spec, since, outcome, failure)

    async def _release(
        self,
        browser: EpisodeBrowser | None,
        cdp: CdpEpisode | None,
        provisioned: ProvisionedEpisode | None,
    ) -> _Episode | None:
        """Close what the episode opened, always, in order (the context goes first: its
        page talks to the product); the first failure among them, if any."""
        failure: _Episode | None = None
        if browser is not None:
            browser_error = await self._close_browser(browser)
            if browser_error is not None:
                failure = _Episode(FailureClass.ENVIRONMENT, "browser", browser_error)
        if cdp is not None:
            browser_error = await self._close_cdp(cdp)
            if browser_error is not None and failure is None:
                failure = _Episode(FailureClass.ENVIRONMENT, "browser", browser_error)
        if provisioned is not None:
            teardown_error = await self._teardown(provisioned)
            if teardown_error is not None and failure is None:
                failure = teardown_error
        return failure

    async def _ended(
        self, spec: EpisodeSpec, since: int, outcome: EpisodeOutcome, failure: _Episode | None
    ) -> EpisodeOutcome | None:
        """The terminal event: abandoned when a service it ran on died meanwhile (never
        scored; None), else finished or failed with its class."""
        ep = spec.episode_id
        if self.health.deaths > since:
            loss = self.health.losses[since]
            reason = f"{loss.service} died while it ran; resume runs it again"
            await self.emit(*typed(EpisodeAbandoned(reason)), ep)
            self.health.abandoned(since)
            return None
        if failure is None:
            await self.emit(*typed(EpisodeFinished()), ep)
            return outcome
        failed = EpisodeFailed(
            failure.failure_class, failure.stage, failure.error, failure.traceback
        )
        await self.emit(*typed(failed), ep)
        return attrs.evolve(outcome, failure_class=failure.failure_class)

    def report_repeated_provider_errors(self) -> None:
        self.provider_errors.report_repeats()

    async def _provision(self, spec: EpisodeSpec) -> ProvisionedEpisode:
        emit = self.emit
        t0 = time.perf_counter()
        limit = self.options.provider_timeout
        provisioned: object = None
        try:
            with anyio.move_on_after(self.options.provider_timeout) as scope:
                provisioned = await self.provider.provision(spec.task, spec.trial, spec.params)
        except SkipEpisode as exc:
            raise _Episode(FailureClass.SKIPPED, "provision", one_line(exc)) from exc
        except Exception as exc:
            tb = self.provider_errors.first("provision", exc)
            raise _Episode(FailureClass.ENVIRONMENT, "provision", one_line(exc), tb) from exc
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
        await emit(*typed(EpisodeProvisioned(setup_ms)), spec.episode_id)
        return provisioned

    async def _open_browser(self, spec: EpisodeSpec) -> EpisodeBrowser:
        """A fresh browser context and page for this episode."""
        assert self.browsers is not None
        return await self._open_within(self.browsers.open_page, "browser page")

    async def _open_cdp(self, channels: Mapping[str, str]) -> CdpEpisode:
        """A fresh context and its CDP endpoint for a protocol agent's episode."""
        browsers = self.browsers
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
            raise _Episode(FailureClass.ENVIRONMENT, "browser", one_line(exc)) from exc
        if opened is None:
            raise _Episode(FailureClass.ENVIRONMENT, "browser", f"no {what} within {limit:g}s")
        return opened

    async def _close_cdp(self, episode: CdpEpisode) -> str | None:
        """Always runs: the context goes even when the agent failed or timed out."""
        try:
            if self.browsers is not None:
                await self.browsers.close_cdp(episode)
        except Exception as exc:  # noqa: BLE001 - the browser's failure, not the arm's
            return one_line(exc)
        return None

    async def _close_browser(self, browser: EpisodeBrowser) -> str | None:
        """Always runs, even when the arm failed, timed out or the run is being cancelled."""
        try:
            await browser.close()
        except Exception as exc:  # noqa: BLE001 - the browser's failure, not the arm's
            return one_line(exc)
        return None

    async def _emit_telemetry(self, telemetry: Telemetry, ep: str) -> None:
        """Actions, with the screenshots kept by ``--screenshots`` in between, in order."""
        emit = self.emit
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
                        store_screenshot, self.run_dir, shot.png, shot.label
                    )
                    await emit(*typed(ArmScreenshot(**data)), ep)
            if i < len(actions):
                action = actions[i]
                await emit(*typed(ArmAction(str(action.kind), json_safe(action.detail))), ep)

    async def _teardown(self, provisioned: ProvisionedEpisode) -> _Episode | None:
        """Always runs, even when the run is being cancelled; bounded by teardown_timeout."""
        limit = self.options.teardown_timeout
        with anyio.CancelScope(shield=True, deadline=anyio.current_time() + limit) as scope:
            try:
                await provisioned.teardown()
            except Exception as exc:  # noqa: BLE001 - provider code: an environment failure
                tb = self.provider_errors.first("teardown", exc)
                return _Episode(FailureClass.ENVIRONMENT, "teardown", one_line(exc), tb)
        if scope.cancelled_caught:
            message = f"teardown did not finish within {limit:g}s"
            return _Episode(FailureClass.ENVIRONMENT, "teardown", message)
        return None

    async def _read_oracle(
        self, oracle: Oracle, spec: EpisodeSpec, event: type[PreSnapshot | PostRead], stage: str
    ) -> Snapshot:
        """Read until readable or out of re-reads; every attempt is an event."""
        emit = self.emit
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
                self.provider_errors.first("oracle read", exc)  # the console's, with -v
                snapshot = Snapshot.unreadable(one_line(exc))
            await emit(*typed(event(attempt, snapshot_data(snapshot))), spec.episode_id)
            if snapshot.readable:
                return snapshot
        raise _Episode(
            FailureClass.EVALUATION,
            stage,
            f"oracle unreadable after {attempts} read(s): {snapshot.error or 'no reason given'}",
        )

    async def _drive(self, spec: EpisodeSpec, provisioned: ProvisionedEpisode) -> EpisodeOutcome:
        emit = self.emit
        ep = spec.episode_id
        pre = await self._read_oracle(provisioned.oracle, spec, PreSnapshot, "pre_snapshot")

        arm = self.arms[spec.arm]
        caps = self.caps[spec.arm]
        env = provisioned.env
        telemetry: Telemetry = env.telemetry
        telemetry.screenshot_policy = self.options.screenshots
        budget = telemetry.log_budget = LogBudget(self.options.agent_log_budget)
        view = TaskView.of(
            spec.task, spec.trial, episode_id=ep, params=spec.params, effect=spec.effect
        )
        await emit(*typed(ArmStarted()), ep)
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
            await reraise_if_stopping()
            arm_error = f"arm {spec.arm!r} raised {one_line(exc)}"
        except Exception as exc:  # noqa: BLE001 - whatever the arm raises is an agent failure
            arm_error = f"arm {spec.arm!r} raised {one_line(exc, ARM_REASON_MAX)}"
        if limit.cancelled_caught:
            arm_error = f"arm {spec.arm!r} ran past the episode timeout of {timeout:g}s"
        wall_ms = (time.perf_counter() - t0) * 1000.0
        if arm_error is None and not isinstance(report, AgentReport):
            arm_error = f"arm {spec.arm!r} returned {type(report).__name__}, not an AgentReport"

        if arm_error is None:
            arm_error = over_budget(budget, report)
            if arm_error is not None:
                arm_error = f"arm {spec.arm!r} {arm_error}"
        calls, out_of_range = bounded_calls(telemetry.model_calls)
        if out_of_range is not None and arm_error is None:
            arm_error = f"arm {spec.arm!r} recorded a model call out of range: {out_of_range}"
        await self._emit_telemetry(telemetry, ep)
        for injected in injections(provisioned):
            await emit(*typed(Injected(str(injected.kind), json_safe(injected.detail))), ep)
        await emit(
            *typed(
                ArmTelemetry(
                    **telemetry_data(
                        price_calls(calls, self.options.prices),
                        action_count(len(telemetry.actions), caps.records_actions),
                        counts_model=caps.uses_model,
                        failed=arm_error is not None,
                    )
                )
            ),
            ep,
        )
        gone = environment_gone(provisioned)
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
        await emit(*typed(reported), ep)
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
