"""The Python API, and the one code path every run takes (the CLI calls ``execute`` too).

``evaluate`` scores arms on the MockMed anchor; ``evaluate_provider`` on any provider.
Both write a run directory (``events.jsonl`` plus the derived artifacts) and return a
RunResult. The ``*_async`` variants are for callers already inside an event loop.
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import anyio
import attrs
import orjson

from effectbench.core.arm import Arm
from effectbench.core.capabilities import ProviderCapabilities
from effectbench.core.rundir import RunDir
from effectbench.outputs.coverage import Shortfall, shortfalls
from effectbench.run.checks import checked_arms, executor_of, preflight_provider
from effectbench.run.options import DEFAULT_MIN_COVERAGE, DEFAULTS, RunOptions
from effectbench.run.plan import Plan, PlanError
from effectbench.run.provenance import plan_of, resolve
from effectbench.run.request import (
    ArmLike,
    EvaluateKeywords,
    ProviderLike,
    RunError,
    RunKeywords,
    RunRequest,
    with_keywords,
)
from effectbench.run.resume import (
    ResumeState,
    check_same_plan,
    nothing_left,
    open_resume,
    reconcile,
)
from effectbench.run.scheduler import LOG_NAME, Observer, RunOutcome, Scheduler

if TYPE_CHECKING:
    from effectbench.run.registry import Registry

DEFAULT_PROVIDER: str = DEFAULTS.provider
DEFAULT_ARMS: tuple[str, ...] = DEFAULTS.arms
DEFAULT_TRIALS: int = DEFAULTS.trials
DEFAULT_CONCURRENCY: int = DEFAULTS.concurrency
DEFAULT_ORACLE_RETRIES: int = DEFAULTS.oracle_retries


@attrs.frozen
class RunResult:
    """A finished (or interrupted) run. ``metrics`` is metrics.json as a dict; ``summary``
    is summary.md. Both are empty when the run was interrupted (resume it to build them)."""

    run_dir: Path
    log_path: Path
    metrics: Mapping[str, Any]
    summary: str
    run_id: str = ""
    interrupted: bool = False
    outcome: RunOutcome | None = attrs.field(default=None, eq=False, repr=False)
    already_complete: bool = False
    """A resume of a run whose every episode had ended: nothing ran, the log is untouched."""
    min_coverage: float = DEFAULT_MIN_COVERAGE
    """The threshold the run was held to (``--min-coverage``, or the one it recorded)."""

    def shortfalls(self) -> list[Shortfall]:
        """The arms that scored nothing or fall below ``min_coverage``, each with its
        commonest failure reason; empty for a result (and for an interrupted run, which has
        no metrics yet)."""
        if self.interrupted or not self.metrics:
            return []
        return shortfalls(self.metrics, self.min_coverage, RunDir(self.run_dir).results)


def _run_id(plan: Plan) -> str:
    now = _dt.datetime.now(_dt.UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{plan.plan_hash[:8]}"


def _prepare_out(out: Path, force: bool) -> None:
    """Create a fresh run directory; --force replaces only a run directory
    (effectbench.run.outdir)."""
    from effectbench.run.outdir import OutDirError, prepare_out_dir

    try:
        prepare_out_dir(out, force=force)
    except OutDirError as exc:
        raise RunError(str(exc)) from None


def _read_outputs(run_dir: Path) -> tuple[dict[str, Any], str]:
    metrics_path, summary_path = RunDir(run_dir).metrics, RunDir(run_dir).summary
    metrics: dict[str, Any] = (
        orjson.loads(metrics_path.read_bytes()) if metrics_path.exists() else {}
    )
    summary = summary_path.read_text(encoding="utf-8") if summary_path.exists() else ""
    return metrics, summary


def build_outputs(run_dir: Path, *, report: bool = True) -> tuple[dict[str, Any], str]:
    """Rebuild every derived artifact from events.jsonl and return (metrics, summary).

    ``report`` also writes report.html from those artifacts (after them, so a report
    that cannot be built never costs an artifact)."""
    from effectbench.audit.attest import attestations
    from effectbench.outputs.artifacts import build_artifacts

    build_artifacts(run_dir, attest=attestations)
    if report:
        from effectbench.report import build_report

        build_report(run_dir)
    return _read_outputs(run_dir)


async def execute(
    request: RunRequest | None = None,
    options: RunOptions | None = None,
    *,
    observer: Observer | None = None,
    registry: Registry | None = None,
    **keywords: Unpack[RunKeywords],
) -> RunResult:
    """Plan, run and score what ``request`` asks, as ``options`` say (either may be given
    as the keywords of ``RunKeywords`` instead, which are put over them). Raises
    effectbench.run.outdir.RunDirLost when the run directory was replaced or removed
    under the run: nothing of another run is ever returned as this one's.

    A resume takes every plan input the request leaves open from the recorded plan, and
    its recorded concurrency and ``min_coverage`` unless others are asked. Concurrency and
    the provider timeout left open take the provider's recommendation (its
    ``recommended_concurrency``, ``provisioning_timeout``), else ``DEFAULTS``. Every check
    that can refuse the run (plugins, browser, executor, isolation, the provider's
    ``preflight`` of ``request.provider_options``) runs before anything is written.
    ``RunResult.shortfalls`` lists the arms below ``min_coverage``."""
    request, options = with_keywords(request or RunRequest(), options or RunOptions(), keywords)
    registry = registry or _registry()
    runner = executor_of(options.executor)
    state = open_resume(request.resume)
    request, options = reconcile(request, options, state)
    plugins = resolve(request, registry)
    plugins = plugins.with_arms(checked_arms(plugins.arms, runner, options.isolate))
    options = options.recommending(ProviderCapabilities.of(plugins.provider))
    plan = plan_of(request, plugins, registry)
    await preflight_provider(plugins.provider, request.provider_options)
    if state is not None:
        run_dir, run_id = request.resume or Path(), state.run_id
        check_same_plan(plan, state, run_dir)
        done = _already_complete(run_dir, run_id, options) if nothing_left(plan, state) else None
        if done is not None:
            return done
    else:
        run_id = _run_id(plan)
        run_dir = request.out if request.out is not None else request.runs_root / run_id
        _prepare_out(run_dir, request.force)
    scheduler = Scheduler(
        plan,
        plugins.provider,
        dict(plugins.arms),
        run_dir,
        run_id=run_id,
        options=options,
        observer=observer,
        executor=runner,
    )
    return await _run(scheduler, state, options)


def _registry() -> Registry:
    from effectbench.run.registry import Registry

    return Registry()


async def _run(scheduler: Scheduler, state: ResumeState | None, options: RunOptions) -> RunResult:
    """Run the episodes, then build the artifacts while the scheduler still holds the
    run's lock, and only from its own log."""
    from effectbench.executors import ExecutorError

    run_dir = scheduler.run_dir
    built: list[tuple[dict[str, Any], str]] = []

    async def finish() -> None:
        build = functools.partial(build_outputs, run_dir, report=options.report)
        built.append(await anyio.to_thread.run_sync(build))

    try:
        outcome = await scheduler.run(state, finish=finish)
    except ExecutorError as exc:
        raise RunError(str(exc)) from None
    metrics, summary = ({}, "") if outcome.interrupted else built[0]
    return RunResult(
        run_dir,
        run_dir / LOG_NAME,
        metrics,
        summary,
        scheduler.run_id,
        outcome.interrupted,
        outcome,
        min_coverage=options.min_coverage,
    )


def _already_complete(run_dir: Path, run_id: str, options: RunOptions) -> RunResult | None:
    """A resume with nothing left to run: no session is opened, so the log stays byte for
    byte as it was; the artifacts already built are returned as they are. None when they
    cannot be read (killed while building them): then the resume runs, to build them."""
    from effectbench.core.rundir import METRICS_FILE, SUMMARY_FILE

    try:
        metrics = orjson.loads((run_dir / METRICS_FILE).read_bytes())
        summary = (run_dir / SUMMARY_FILE).read_text(encoding="utf-8")
    except (OSError, orjson.JSONDecodeError, UnicodeDecodeError):
        return None
    return RunResult(
        run_dir,
        run_dir / LOG_NAME,
        metrics,
        summary,
        run_id,
        already_complete=True,
        min_coverage=options.min_coverage,
    )


def _as_list(arm: ArmLike | Sequence[ArmLike]) -> list[ArmLike]:
    if isinstance(arm, (str, Arm)):
        return [arm]
    return list(arm)


async def evaluate_provider_async(
    arm: ArmLike | Sequence[ArmLike],
    provider: ProviderLike,
    options: RunOptions | None = None,
    *,
    observer: Observer | None = None,
    registry: Registry | None = None,
    **keywords: Unpack[EvaluateKeywords],
) -> RunResult:
    """Score one arm (or several) on ``provider`` (an instance or an entry-point name);
    ``keywords`` as ``execute`` takes them (``trials``, ``out``, ``concurrency``, ...)."""
    request = RunRequest(provider=provider, arms=_as_list(arm))
    return await execute(request, options, observer=observer, registry=registry, **keywords)


async def evaluate_async(
    arm: ArmLike | Sequence[ArmLike],
    options: RunOptions | None = None,
    *,
    observer: Observer | None = None,
    registry: Registry | None = None,
    **keywords: Unpack[EvaluateKeywords],
) -> RunResult:
    """Score an arm on the MockMed anchor (``DEFAULTS.provider``)."""
    return await evaluate_provider_async(
        arm, DEFAULTS.provider, options, observer=observer, registry=registry, **keywords
    )


def _run_sync(name: str, run: Callable[[], Awaitable[RunResult]]) -> RunResult:
    try:
        import asyncio

        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RunError(f"{name}() cannot run inside a running event loop; await {name}_async(...)")
    result: RunResult = anyio.run(run)
    return result


def evaluate_provider(
    arm: ArmLike | Sequence[ArmLike],
    provider: ProviderLike,
    options: RunOptions | None = None,
    *,
    observer: Observer | None = None,
    registry: Registry | None = None,
    **keywords: Unpack[EvaluateKeywords],
) -> RunResult:
    """Blocking form of evaluate_provider_async."""
    return _run_sync(
        "evaluate_provider",
        lambda: evaluate_provider_async(
            arm, provider, options, observer=observer, registry=registry, **keywords
        ),
    )


def evaluate(
    arm: ArmLike | Sequence[ArmLike],
    options: RunOptions | None = None,
    *,
    observer: Observer | None = None,
    registry: Registry | None = None,
    **keywords: Unpack[EvaluateKeywords],
) -> RunResult:
    """Blocking form of evaluate_async (MockMed anchor)."""
    return _run_sync(
        "evaluate",
        lambda: evaluate_async(arm, options, observer=observer, registry=registry, **keywords),
    )


__all__ = [
    "DEFAULT_ARMS",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_PROVIDER",
    "DEFAULT_TRIALS",
    "ArmLike",
    "PlanError",
    "ProviderLike",
    "RunError",
    "RunKeywords",
    "RunOptions",
    "RunRequest",
    "RunResult",
    "build_outputs",
    "evaluate",
    "evaluate_async",
    "evaluate_provider",
    "evaluate_provider_async",
    "execute",
]
