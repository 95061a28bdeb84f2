"""The commands that start a run: ``run``, ``reference`` (the anchor) and ``audit``.
Each builds a RunRequest and RunOptions (or the audit's arguments) and goes through the
API's one code path."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from effectbench.cli.common import (
    EXIT_INTERRUPTED,
    byte_size,
    concurrency_option,
    fail,
    flag_message,
    force_option,
    headline,
    limit_option,
    no_report_option,
    out_option,
    provider_option,
    provider_timeout_option,
    quiet_option,
    run_dir_line,
    say,
    trials_option,
    was_given,
)
from effectbench.core.rundir import RunDir
from effectbench.run.defaults import DEFAULTS, OptionsError

__all__ = ["audit", "reference", "run"]


@click.command()
@provider_option
@click.option(
    "--arm",
    "arms",
    multiple=True,
    help="Arm entry point or module:attribute, or a protocol agent 'exec:COMMAND' "
    "(also exec-each:, exec+browser:, exec-each+browser:; 'NAME=exec:...' names it); "
    f"repeat for several. [default: {', '.join(DEFAULTS.arms)}]",
)
@trials_option(DEFAULTS.trials)
@concurrency_option(None, "; a resume keeps the recorded one")
@click.option(
    "--task",
    "tasks",
    multiple=True,
    metavar="GLOB",
    help="Only tasks whose id matches (repeatable).",
)
@limit_option("; a resume keeps the recorded one")
@out_option()
@click.option(
    "--resume",
    type=click.Path(path_type=Path),
    metavar="RUN_DIR",
    help="Continue an interrupted run in RUN_DIR (same plan required).",
)
@click.option(
    "--episode-timeout", type=float, metavar="S", help="Seconds an arm may take per episode."
)
@click.option(
    "--oracle-retries",
    type=int,
    default=DEFAULTS.oracle_retries,
    show_default=True,
    help="Re-reads of an unreadable oracle, with exponential backoff.",
)
@provider_timeout_option("")
@click.option(
    "--screenshots",
    type=click.Choice(["none", "final", "all"]),
    default=DEFAULTS.screenshots,
    show_default=True,
    help="Screenshots kept as evidence: none, each episode's final one, or all.",
)
@click.option(
    "--pg-dsn",
    metavar="DSN",
    help="PostgreSQL server for providers that use one (the role needs CREATEDB and "
    "CREATEROLE). [default: $EFFECTBENCH_PG_DSN, else a server the harness starts]",
)
@click.option(
    "--isolate/--no-isolate",
    default=None,
    help="Contain protocol agents (exec:...) in namespaces; --isolate fails where the host "
    "cannot. [default: contain when the host can, else say so]",
)
@click.option(
    "--executor",
    default=DEFAULTS.executor,
    show_default=True,
    metavar="WHERE",
    help="Where episodes run: local, dask://HOST:PORT (a Dask scheduler) or dask-local:N "
    "(N local worker processes); needs effectbench[dask] for Dask.",
)
@click.option(
    "--worker-timeout",
    type=float,
    default=DEFAULTS.worker_timeout,
    show_default=True,
    metavar="S",
    help="Seconds a Dask run may go without a live worker (or its scheduler) before it "
    "stops with exit 5; what was in flight is left for --resume.",
)
@click.option(
    "--prices",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Price table (JSON: version, model -> USD per 1M input/output tokens) that prices "
    "model calls whose arm reported no cost.",
)
@click.option(
    "--min-coverage",
    type=float,
    default=None,
    metavar="FRACTION",
    help="Least fraction of its planned episodes each arm must score (0 to 1); below it, or "
    "for an arm that scored nothing, the run exits 3 (incomplete) naming the arm, and verify "
    f"and export refuse it. [default: {DEFAULTS.min_coverage:g}; a resume keeps the recorded "
    "one]",
)
@click.option(
    "--agent-log-budget",
    callback=byte_size,
    metavar="BYTES",
    help="Bytes an arm may put into the log per episode (actions, model calls, its report's "
    "message), e.g. 4M or 512K; past it the episode is an agent failure. [default: 4M]",
)
@force_option
@quiet_option
@no_report_option
@click.pass_context
def run(
    ctx: click.Context,
    provider: str,
    arms: tuple[str, ...],
    trials: int,
    concurrency: int | None,
    tasks: tuple[str, ...],
    limit: int | None,
    out: Path | None,
    resume: Path | None,
    episode_timeout: float | None,
    oracle_retries: int,
    provider_timeout: float | None,
    screenshots: str,
    pg_dsn: str | None,
    isolate: bool | None,
    executor: str,
    worker_timeout: float,
    prices: Path | None,
    min_coverage: float | None,
    agent_log_budget: int | None,
    force: bool,
    quiet: bool,
    no_report: bool,
) -> int:
    """Run arms on a provider's tasks and score them (exit 3 when an arm measured too
    little: docs/exit-codes.md)."""
    from effectbench.core.prices import load_prices
    from effectbench.run.options import RunOptions

    budget = DEFAULTS.agent_log_budget if agent_log_budget is None else agent_log_budget
    try:
        options = RunOptions(
            concurrency=concurrency,  # None: the recorded one, the provider's, the default
            episode_timeout=episode_timeout,
            oracle_retries=oracle_retries,
            provider_timeout=provider_timeout,
            screenshots=screenshots,  # type: ignore[arg-type]  # a click.Choice of them
            isolate=isolate,
            executor=executor,
            worker_timeout=worker_timeout,
            min_coverage=min_coverage,
            agent_log_budget=budget,
            report=not no_report,
        )
    except OptionsError as exc:
        fail(flag_message(exc))
    resuming = resume is not None  # options not given on this command line: the recorded
    request = _request(
        provider=provider if not resuming or was_given(ctx, "provider") else None,
        arms=arms or None,
        trials=trials if not resuming or was_given(ctx, "trials") else None,
        task_globs=tasks or (None if resuming else ()),
        limit=limit,
        out=out,
        resume=resume,
        force=force,
        provider_options={"pg-dsn": pg_dsn} if pg_dsn else {},
    )
    if prices is not None:
        import attrs

        options = attrs.evolve(options, prices=load_prices(prices))
    return _execute(quiet, request, options)


def _request(**fields: Any) -> Any:
    """A RunRequest, its refusal as the command's one-line usage error."""
    from effectbench.run.plan import PlanError
    from effectbench.run.request import RunError, RunRequest

    try:
        return RunRequest(**fields)
    except (RunError, PlanError) as exc:
        fail(str(exc))


def _run_with_progress(quiet: bool, request: Any, options: Any) -> Any:
    """One run through the API's code path, with a progress display and signal handling."""
    import anyio
    import attrs

    from effectbench.api import execute
    from effectbench.cli.console import make_progress

    progress = make_progress(sys.stderr, quiet=quiet)
    options = attrs.evolve(options, handle_signals=True)
    try:
        return anyio.run(lambda: execute(request, options, observer=progress))
    finally:
        if progress is not None:
            progress.close()


def _interrupted(result: Any, message: str) -> int:
    """Say so, and exit 128 + the signal that stopped the run (130 if none is known)."""
    click.echo(message, err=True)
    signum = result.outcome.signal if result.outcome is not None else None
    return 128 + signum if signum else EXIT_INTERRUPTED


def _service_lost(lost: Any, result: Any) -> int:
    """A harness-owned service died: one line for each, then how to go on (exit 5)."""
    from effectbench.core.exitcodes import ExitCode

    for loss in lost:
        click.echo(f"effectbench: {loss.line()}", err=True)
    if result.interrupted:
        click.echo(
            "the episodes it took are unscored; once it is back, continue with: "
            f"effectbench run --resume {result.run_dir}",
            err=True,
        )
    else:
        headline(result.metrics, result.run_dir)
    return int(ExitCode.SERVICE_LOST)


def _execute(quiet: bool, request: Any, options: Any) -> int:
    result = _run_with_progress(quiet, request, options)
    if result.already_complete:
        say(f"run {result.run_id} is already complete; nothing to resume")
    lost = result.outcome.lost if result.outcome is not None else ()
    if lost:
        return _service_lost(lost, result)
    if result.interrupted:
        return _interrupted(
            result,
            "interrupted; the log is intact. Continue with: effectbench run --resume "
            f"{result.run_dir}",
        )
    headline(result.metrics, result.run_dir)
    return _incomplete(result.shortfalls())


def _incomplete(short: Any) -> int:
    """One line per arm that measured too little, and INCOMPLETE; OK when none did."""
    from effectbench.core.exitcodes import ExitCode

    for s in short:
        click.echo(f"effectbench: incomplete: {s.line()}", err=True)
    if short:
        click.echo(
            "effectbench: the run is not a result (exit 3): fix the failures above and run "
            "again, or lower --min-coverage",
            err=True,
        )
        return int(ExitCode.INCOMPLETE)
    return int(ExitCode.OK)


@click.command()
@concurrency_option(None)
@out_option()
@force_option
@quiet_option
@click.pass_context
def reference(
    ctx: click.Context, concurrency: int | None, out: Path | None, force: bool, quiet: bool
) -> int:
    """Run both baselines on the MockMed anchor and check the pinned values (exit 1 if any
    differs)."""
    import orjson

    from effectbench.cli.console import format_reference, reference_rows

    try:
        from effectbench_mockmed.anchor import PINNED, TRIALS
    except ImportError as exc:
        fail(f"the MockMed provider is not installed ({exc}); reinstall effectbench")
    from effectbench.run.options import RunOptions

    request = _request(
        provider=DEFAULTS.provider, arms=tuple(PINNED), trials=TRIALS, out=out, force=force
    )
    result = _run_with_progress(quiet, request, RunOptions(concurrency=concurrency))
    if result.interrupted:
        return _interrupted(
            result, f"interrupted; nothing was checked ({run_dir_line(result.run_dir)})"
        )
    results_path = RunDir(result.run_dir).results
    rows_json = [
        orjson.loads(line) for line in results_path.read_bytes().splitlines() if line.strip()
    ]
    rows = reference_rows(PINNED, result.metrics, rows_json)
    say(format_reference(rows))
    say(run_dir_line(result.run_dir))
    bad = [r for r in rows if not r[4]]
    if bad:
        say(f"{len(bad)} pinned value(s) differ: the harness no longer reproduces the anchor")
        return 1
    say("all pinned values reproduced")
    return 0


@click.command()
@click.option("--provider", required=True, help="Provider entry point or module:attribute.")
@trials_option(DEFAULTS.audit_trials)
@concurrency_option(DEFAULTS.audit_concurrency)
@click.option(
    "--task",
    "tasks",
    multiple=True,
    metavar="GLOB",
    help="Only tasks whose id matches (repeatable).",
)
@limit_option()
@out_option("Audit run directory.")
@provider_timeout_option("")
@force_option
def audit(
    provider: str,
    trials: int,
    concurrency: int,
    tasks: tuple[str, ...],
    limit: int | None,
    out: Path | None,
    provider_timeout: float | None,
    force: bool,
) -> int:
    """Run the reference arm and every adversary over every task; exit 1 naming each task that
    fails."""
    from effectbench.cli.audit import audit_cli_main

    return audit_cli_main(
        provider,
        out,
        trials=trials,
        concurrency=concurrency,
        force=force,
        provider_timeout=provider_timeout,
        task_globs=tasks,
        limit=limit,
    )
