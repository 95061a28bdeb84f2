"""The Python API, and the one code path every run takes (the CLI calls ``execute`` too).

``evaluate`` scores arms on the MockMed anchor; ``evaluate_provider`` on any provider.
Both write a run directory (``events.jsonl`` plus the derived artifacts) and return a
RunResult. The ``*_async`` variants are for callers already inside an event loop.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import orjson

from effectbench.core.arm import Arm
from effectbench.core.capabilities import ArmCapabilities, ProviderCapabilities
from effectbench.core.errors import EffectBenchError
from effectbench.core.prices import PriceTable, load_prices
from effectbench.core.provider import BenchmarkProvider
from effectbench.core.rundir import RunDir
from effectbench.core.versions import (
    HARNESS_DISTRIBUTION,
    HARNESS_PACKAGES,
    PACKAGE_VERSION,
    harness_shipped,
)
from effectbench.outputs.coverage import Shortfall, shortfalls
from effectbench.run.options import DEFAULT_MIN_COVERAGE, DEFAULTS, OptionsError, RunOptions
from effectbench.run.plan import (
    Plan,
    PlanError,
    ProviderInfo,
    build_plan,
    count_planned,
    diff_plans,
)
from effectbench.run.resume import ResumeState, load_resume_state
from effectbench.run.scheduler import LOG_NAME, Observer, RunOutcome, Scheduler

DEFAULT_PROVIDER = "mockmed"
DEFAULT_ARMS: tuple[str, ...] = ("screen_only", "effect_verified")
DEFAULT_TRIALS = 10
DEFAULT_CONCURRENCY = DEFAULTS.concurrency
DEFAULT_ORACLE_RETRIES = DEFAULTS.oracle_retries


class RunError(EffectBenchError):
    """A run that cannot start or continue as asked; the message says what to do."""


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


ArmLike = Arm | str
ProviderLike = BenchmarkProvider | str


def _shipped_by(
    obj: object,
    ref: str | None,
    group: str,
    registry: Any,
    dists: Callable[[], Mapping[str, list[str]]],
) -> tuple[str | None, str | None]:
    """(distribution, version) of the code behind a plugin: from its entry point's metadata
    when it was named, else from the distribution that ships its top-level module."""
    import importlib_metadata

    info = registry.info(group, ref) if ref is not None else None
    if info is not None and info.distribution is not None:
        return info.distribution, info.version
    names = dists().get(type(obj).__module__.split(".")[0])
    if not names:
        return None, None
    dist = min(names)
    try:
        return dist, importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return dist, None


def _arm_version(arm: Arm, shipped: tuple[str | None, str | None]) -> str | None:
    """What code an arm is: its own ``version`` attribute, else ``dist==version`` of the
    distribution shipping it, else None (unknown, which still differs from a known one).
    An arm from the harness's own packages is ``effectbench==<version>`` even where no
    distribution maps them (an editable install): verify counts it as harness code, so
    an arm from anywhere else may not claim that version (a RunError)."""
    module = type(arm).__module__
    harness = module.split(".")[0] in HARNESS_PACKAGES
    own = ArmCapabilities.of(arm).version
    dist, version = shipped
    if dist is None and harness:
        dist, version = HARNESS_DISTRIBUTION, PACKAGE_VERSION
    found = dist if dist is None or version is None else f"{dist}=={version}"
    if own is not None:
        found = own
    if not harness and harness_shipped(found):
        raise RunError(
            f"arm {arm.name!r} gives its version as {found!r}, the harness's own, but its "
            f"code ({module}) is not the harness's: give it a version of its own"
        )
    return found


def _resolve_provider(
    provider: ProviderLike, registry: Any
) -> tuple[BenchmarkProvider, str | None]:
    if isinstance(provider, str):
        return registry.provider(provider), provider
    if not isinstance(provider, BenchmarkProvider):
        raise RunError(
            f"{provider!r} is not a BenchmarkProvider (needs name, version, tasks, start, stop, "
            "provision)"
        )
    _check_plugin_object(provider, "provider", f"provider {provider.name!r}")
    return provider, None


def _resolve_arms(
    arms: Sequence[ArmLike], registry: Any
) -> tuple[dict[str, Arm], list[str | None]]:
    out: dict[str, Arm] = {}
    refs: list[str | None] = []
    for item in arms:
        if isinstance(item, str):
            arm = registry.arm(item)
            ref: str | None = item
        elif isinstance(item, Arm):
            arm, ref = item, None
            _check_plugin_object(arm, "arm", f"arm {arm.name!r}")
        else:
            raise RunError(f"{item!r} is not an Arm (needs a name and an async run(task, env))")
        if arm.name in out:
            hint = ""
            if isinstance(item, str) and item.startswith(arm.name.partition(":")[0] + ":"):
                # a protocol agent named after its file (exec:agent): it can be named apart
                hint = f" (agents whose files share a name: name each, --arm NAME={item})"
            raise RunError(f"arm {arm.name!r} is named twice; give each arm once{hint}")
        out[arm.name] = arm
        refs.append(ref)
    return out, refs


def _check_plugin_object(obj: object, kind: str, label: str) -> None:
    """A plugin handed over as an object gets the registry's capability check."""
    from effectbench.run.registry import PluginError, check_capabilities

    try:
        check_capabilities(obj, kind, label)
    except PluginError as exc:
        raise RunError(str(exc)) from None


def _check_executor_fits(arms: Mapping[str, Arm], runner: Any) -> None:
    """Browser arms and protocol agents hold a resource the harness process owns (the
    browser pool, the agent process): they run with the local executor only."""
    from effectbench.executors.local import LocalExecutor

    if runner is None or isinstance(runner, LocalExecutor):
        return

    held = sorted(
        name for name, arm in arms.items() if ArmCapabilities.of(arm).holds_harness_resource
    )
    if held:
        raise RunError(
            f"arm {', '.join(held)} needs the harness's own browser or agent process and runs "
            "with --executor local only; drop --executor or run that arm separately"
        )


def _preflight_arms(arms: Mapping[str, Arm]) -> None:
    """Before anything is written: an arm with a ``preflight()`` (e.g. ``llm`` with no
    endpoint configured) may refuse the run in one line."""
    for name, arm in arms.items():
        check = ArmCapabilities.of(arm).preflight
        if check is None:
            continue
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - plugin code: one line for the user
            raise RunError(f"arm {name!r} cannot run: {exc}") from None


def _check_browser(arms: Mapping[str, Arm]) -> None:
    """Before anything is written: a browser arm needs Playwright and a Chromium."""
    from effectbench.browser import (
        BrowserUnavailable,
        check_browser,
        find_chromium,
        uses_browser,
        uses_browser_cdp,
    )

    needing = sorted(name for name, arm in arms.items() if uses_browser(arm))
    cdp = sorted(name for name, arm in arms.items() if uses_browser_cdp(arm))
    if not needing and not cdp:
        return
    try:
        check_browser() if needing else find_chromium()
    except BrowserUnavailable as exc:
        raise RunError(f"arm {', '.join(needing or cdp)} drives a browser: {exc}") from None


def _apply_isolation(arms: dict[str, Arm], isolate: bool | None) -> dict[str, Arm]:
    """Give protocol agents the run's ``--isolate`` choice. An in-process arm cannot be
    contained, so requiring isolation for one is refused; a protocol agent that would be
    isolated on a host without containment is said so in one line (and recorded)."""
    import structlog

    out: dict[str, Arm] = {}
    notes: set[str] = set()
    for name, arm in arms.items():
        configure = ArmCapabilities.of(arm).with_isolation
        if configure is None:
            if isolate:
                raise RunError(
                    f"arm {name!r} runs inside the harness process and cannot be isolated; "
                    "--isolate is for protocol agents (exec:...): drop it or run this arm "
                    "without it"
                )
            out[name] = arm
            continue
        if isolate is not None:  # else the agent keeps its own choice (by default: contain)
            arm = configure(isolate)
        out[name] = arm
        caps = ArmCapabilities.of(arm)
        if caps.execution_error is not None:  # ContainmentUnavailable: one line for the user
            raise RunError(f"{caps.execution_error}; install bubblewrap, or run without --isolate")
        if caps.execution_note:
            notes.add(caps.execution_note)
    for note in sorted(notes):
        structlog.get_logger("effectbench.agents").warning(
            "agent.not_contained", reason=note, running_as="subprocess"
        )
    return out


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
    *,
    provider: ProviderLike | None = None,
    arms: Sequence[ArmLike] | None = None,
    trials: int | None = None,
    task_globs: Sequence[str] | None = None,
    concurrency: int | None = DEFAULT_CONCURRENCY,
    out: str | os.PathLike[str] | None = None,
    resume: str | os.PathLike[str] | None = None,
    episode_timeout: float | None = None,
    oracle_retries: int = DEFAULT_ORACLE_RETRIES,
    oracle_backoff: float = DEFAULTS.oracle_backoff,
    provider_timeout: float = DEFAULTS.provider_timeout,
    force: bool = False,
    screenshots: str = "all",
    isolate: bool | None = None,
    handle_signals: bool = False,
    observer: Observer | None = None,
    registry: Any = None,
    runs_root: str | os.PathLike[str] = "runs",
    report: bool = True,
    provider_options: Mapping[str, str] | None = None,
    executor: str = "local",
    prices: PriceTable | str | os.PathLike[str] | None = None,
    worker_timeout: float = DEFAULTS.worker_timeout,
    min_coverage: float | None = None,
    agent_log_budget: int = DEFAULTS.agent_log_budget,
) -> RunResult:
    """Plan, run and score. With ``resume``, any of provider/arms/trials/task_globs left
    as None is taken from the recorded plan; given ones must match it. Raises
    effectbench.rundir.RunDirLost when the run directory was replaced or removed under
    the run: nothing of another run is ever returned as this one's. ``report``
    False skips report.html.

    ``provider_options`` (e.g. ``{"pg-dsn": ...}`` from ``--pg-dsn``) go to the provider's
    optional ``preflight``, which runs before anything is written (see ``_preflight``).
    ``isolate``: None contains protocol agents where the host can, True requires it, False never.
    ``prices`` (``--prices FILE``, or a PriceTable) prices model calls whose arm gave no cost; a
    bad file raises PriceTableError before anything is written.
    ``min_coverage`` (``--min-coverage``): the least fraction of its planned episodes each arm
    must score for the run to be a result, recorded in the log for ``verify``; None takes
    the recorded one on a resume, else DEFAULT_MIN_COVERAGE. The result carries it and
    ``RunResult.shortfalls`` lists the arms below it (the CLI exits INCOMPLETE for them).
    ``agent_log_budget`` (``--agent-log-budget``): bytes an arm may put into the log per
    episode."""
    if registry is None:
        from effectbench.run.registry import Registry

        registry = Registry()
    try:
        options = RunOptions(
            concurrency=concurrency if concurrency is not None else DEFAULTS.concurrency,
            episode_timeout=episode_timeout,
            oracle_retries=oracle_retries,
            oracle_backoff=oracle_backoff,
            provider_timeout=provider_timeout,
            handle_signals=handle_signals,
            screenshots=screenshots,  # type: ignore[arg-type]  # validated here
            worker_timeout=worker_timeout,
            min_coverage=DEFAULT_MIN_COVERAGE if min_coverage is None else min_coverage,
            agent_log_budget=agent_log_budget,
        )
    except OptionsError as exc:
        raise RunError(str(exc)) from exc  # the cause names the option for the CLI
    if prices is not None:
        table = prices if isinstance(prices, PriceTable) else load_prices(prices)
        options = attrs.evolve(options, prices=table)
    runner = _executor(executor)

    state: ResumeState | None = None
    if resume is not None:
        run_dir = Path(resume)
        if run_dir.exists() and not run_dir.is_dir():
            raise RunError(
                f"--resume {run_dir} is a file, not a run directory; give the directory that "
                "holds events.jsonl"
            )
        if not run_dir.is_dir():
            raise RunError(
                f"run directory {run_dir} does not exist; check the path given to --resume"
            )
        if not (run_dir / LOG_NAME).is_file():
            raise RunError(
                f"{run_dir} holds no {LOG_NAME}; it is not a run directory that can be resumed"
            )
        state = load_resume_state(run_dir / LOG_NAME)
        if concurrency is None and state.concurrency:  # None: not given, keep the recorded one
            options = attrs.evolve(options, concurrency=state.concurrency)
        if min_coverage is None and state.min_coverage is not None:
            options = attrs.evolve(options, min_coverage=state.min_coverage)
        recorded = state.plan
        refs = recorded.get("refs") or {}
        if provider is None:
            provider = refs.get("provider") or (recorded.get("provider") or {}).get("name")
        if arms is None:
            arm_refs = refs.get("arms") or []
            arms = [r or n for r, n in zip(arm_refs, recorded.get("arms") or [])] or list(
                recorded.get("arms") or []
            )
        if trials is None:
            trials = int(recorded.get("trials") or 0)
        if task_globs is None:
            task_globs = list(recorded.get("task_globs") or [])
        if provider is None or not arms:
            raise RunError(
                f"{run_dir / LOG_NAME} records no provider or arms; pass --provider and --arm"
            )

    prov, prov_ref = _resolve_provider(
        provider if provider is not None else DEFAULT_PROVIDER, registry
    )
    arm_map, arm_refs_used = _resolve_arms(arms if arms is not None else DEFAULT_ARMS, registry)
    _check_browser(arm_map)
    _preflight_arms(arm_map)
    _check_executor_fits(arm_map, runner)
    arm_map = _apply_isolation(arm_map, isolate)
    try:
        tasks = list(prov.tasks())
    except Exception as exc:  # noqa: BLE001 - third-party code; reported as one line
        raise RunError(
            f"provider {prov.name!r} failed to list its tasks: {type(exc).__name__}: {exc}"
        ) from None
    import importlib_metadata

    from effectbench.run.registry import ARMS, PROVIDERS

    # Scanning every installed distribution costs ~45 ms: only for plugins given as
    # objects or module:attribute references, which entry-point metadata does not cover.
    dists = functools.cache(importlib_metadata.packages_distributions)
    prov_dist, _ = _shipped_by(prov, prov_ref, PROVIDERS, registry, dists)
    arm_versions = {
        name: _arm_version(arm, _shipped_by(arm, ref, ARMS, registry, dists))
        for (name, arm), ref in zip(arm_map.items(), arm_refs_used, strict=True)
    }
    plan = build_plan(
        ProviderInfo(prov.name, prov.version, prov_dist),
        tasks,
        list(arm_map),
        DEFAULT_TRIALS if trials is None else trials,
        task_globs or (),
        refs={"provider": prov_ref, "arms": arm_refs_used},
        arm_versions=arm_versions,
        fixture=ProviderCapabilities.of(prov).fixture,
    )

    await _preflight(prov, provider_options or {})
    if state is not None:
        run_dir = Path(resume)  # type: ignore[arg-type]
        if plan.plan_hash != state.plan_hash:
            diffs = diff_plans(state.plan, plan.identity()) or ["the plan hash differs"]
            raise RunError(f"refusing to resume {run_dir}: the plan differs ({'; '.join(diffs)})")
        run_id = state.run_id
        if not state.unterminated and count_planned(plan, state.terminated) == plan.n_episodes:
            done = _already_complete(run_dir, run_id, options.min_coverage)
            if done is not None:
                return done
    else:
        run_id = _run_id(plan)
        run_dir = Path(out) if out is not None else Path(runs_root) / run_id
        _prepare_out(run_dir, force)

    scheduler = Scheduler(
        plan,
        prov,
        arm_map,
        run_dir,
        run_id=run_id,
        options=options,
        observer=observer,
        executor=runner,
    )
    built: list[tuple[dict[str, Any], str]] = []

    async def finish() -> None:
        built.append(
            await anyio.to_thread.run_sync(functools.partial(build_outputs, run_dir, report=report))
        )

    # Built while the scheduler still holds the run's lock, and only from its own log.
    from effectbench.executors import ExecutorError

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
        run_id,
        outcome.interrupted,
        outcome,
        min_coverage=options.min_coverage,
    )


def _already_complete(run_dir: Path, run_id: str, min_coverage: float) -> RunResult | None:
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
        min_coverage=min_coverage,
    )


async def _preflight(prov: BenchmarkProvider, options: Mapping[str, str]) -> None:
    """Let a provider check its configuration before the run directory is touched, so a
    bad one (an unreachable database, say) fails with one line and writes nothing.

    The hook is optional: ``async def preflight(self, options) -> None``, raising with a
    message for the user. A provider without it accepts no options.
    """
    check = ProviderCapabilities.of(prov).preflight
    if check is None:
        if options:
            flags = ", ".join(f"--{k}" for k in sorted(options))
            raise RunError(f"provider {prov.name!r} takes no {flags}; drop it")
        return
    try:
        await check(dict(options))
    except Exception as exc:  # noqa: BLE001 - third-party code; reported as one line
        message = " ".join(str(exc).split()) or type(exc).__name__
        raise RunError(f"provider {prov.name!r} cannot run: {message}") from None


def _executor(text: str) -> Any:
    """The ``--executor`` value as an executor (``local``, the default, runs episodes here)."""
    from effectbench.executors import ExecutorError, parse

    try:
        return parse(text)
    except ExecutorError as exc:
        raise RunError(str(exc)) from None


def _as_list(arm: ArmLike | Sequence[ArmLike]) -> list[ArmLike]:
    if isinstance(arm, (str, Arm)):
        return [arm]
    return list(arm)


async def evaluate_provider_async(
    arm: ArmLike | Sequence[ArmLike],
    provider: ProviderLike,
    *,
    trials: int = DEFAULT_TRIALS,
    concurrency: int = DEFAULT_CONCURRENCY,
    out: str | os.PathLike[str] | None = None,
    **kw: Any,
) -> RunResult:
    """Score one arm (or several) on ``provider`` (an instance or an entry-point name)."""
    return await execute(
        provider=provider, arms=_as_list(arm), trials=trials, concurrency=concurrency, out=out, **kw
    )


async def evaluate_async(
    arm: ArmLike | Sequence[ArmLike],
    *,
    trials: int = DEFAULT_TRIALS,
    concurrency: int = DEFAULT_CONCURRENCY,
    out: str | os.PathLike[str] | None = None,
    **kw: Any,
) -> RunResult:
    """Score an arm on the MockMed anchor."""
    return await evaluate_provider_async(
        arm, DEFAULT_PROVIDER, trials=trials, concurrency=concurrency, out=out, **kw
    )


def _run_sync(fn: Any, *args: Any, **kw: Any) -> RunResult:
    try:
        import asyncio

        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RunError(
            f"{fn.__name__[:-6]}() cannot run inside a running event loop; await {fn.__name__}(...)"
        )
    result: RunResult = anyio.run(lambda: fn(*args, **kw))
    return result


def evaluate_provider(
    arm: ArmLike | Sequence[ArmLike],
    provider: ProviderLike,
    *,
    trials: int = DEFAULT_TRIALS,
    concurrency: int = DEFAULT_CONCURRENCY,
    out: str | os.PathLike[str] | None = None,
    **kw: Any,
) -> RunResult:
    """Blocking form of evaluate_provider_async."""
    return _run_sync(
        evaluate_provider_async,
        arm,
        provider,
        trials=trials,
        concurrency=concurrency,
        out=out,
        **kw,
    )


def evaluate(
    arm: ArmLike | Sequence[ArmLike],
    *,
    trials: int = DEFAULT_TRIALS,
    concurrency: int = DEFAULT_CONCURRENCY,
    out: str | os.PathLike[str] | None = None,
    **kw: Any,
) -> RunResult:
    """Blocking form of evaluate_async (MockMed anchor)."""
    return _run_sync(evaluate_async, arm, trials=trials, concurrency=concurrency, out=out, **kw)


__all__ = [
    "DEFAULT_ARMS",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_PROVIDER",
    "DEFAULT_TRIALS",
    "PlanError",
    "RunError",
    "RunResult",
    "build_outputs",
    "evaluate",
    "evaluate_async",
    "evaluate_provider",
    "evaluate_provider_async",
    "execute",
]
