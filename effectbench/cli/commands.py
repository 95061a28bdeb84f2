"""The ``effectbench`` command.

Imports nothing heavy at module level (``effectbench --version`` must stay fast): every
command imports what it needs when it runs. User errors print one line on stderr and
exit with code 2; a traceback appears only with ``--debug``.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from effectbench.core.rundir import LOG_FILE, RunDir
from effectbench.core.versions import PACKAGE_VERSION
from effectbench.run.options import DEFAULTS, OptionsError

EXIT_USAGE = 2
_F = TypeVar("_F", bound=Callable[..., Any])
EXIT_INTERRUPTED = 130
_NO_ARGS_IS_HELP: tuple[type[click.ClickException], ...] = tuple(
    t for t in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if isinstance(t, type)
)
"""Raised for a group called without a command (click >= 8.2; older click prints the help
itself and exits 0)."""


class _Settings:
    def __init__(self, log_format: str, verbosity: int, debug: bool) -> None:
        self.log_format = log_format
        self.verbosity = verbosity
        self.debug = debug


def _fail(message: str) -> NoReturn:
    raise click.UsageError(message)


def _out(text: str) -> None:
    click.echo(text)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    PACKAGE_VERSION, "--version", prog_name="effectbench", message="%(prog)s %(version)s"
)
@click.option(
    "--log-format",
    type=click.Choice(["console", "json"]),
    default="console",
    show_default=True,
    help="Format of diagnostics on stderr.",
)
@click.option("-v", "--verbose", count=True, help="More diagnostics (-v info, -vv debug).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, log_format: str, verbose: int, debug: bool) -> None:
    """Score what automation agents really did to the system of record."""
    from effectbench.cli.logsetup import configure

    configure("json" if log_format == "json" else "console", verbosity=2 if debug else verbose)
    ctx.obj = _Settings(log_format, verbose, debug)


def _positive_int(name: str) -> Any:
    def check(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise click.BadParameter(f"must be a positive integer, got {value}", param_hint=name)
        return value

    return check


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _byte_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """``4194304``, ``4M``, ``512K``, ``1G`` (binary units; a trailing ``iB`` or ``B`` is
    allowed) as a number of bytes."""
    if value is None:
        return None
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    unit = text[-1:] if text[-1:] in ("K", "M", "G") else ""
    digits = text[: len(text) - len(unit)]
    if not digits.isdigit():
        raise click.BadParameter(
            f"must be a number of bytes such as 4194304, 512K or 4M, got {value!r}"
        )
    return int(digits) * _UNITS[unit]


def _concurrency_option(default: int | None, note: str = "") -> Callable[[_F], _F]:
    """``--concurrency``; None leaves it to the provider's recommendation, else the default."""
    shown = f"[default: {DEFAULTS.concurrency}, or the provider's recommended_concurrency{note}]"
    return click.option(
        "--concurrency",
        type=int,
        default=default,
        show_default=default is not None,
        callback=_positive_int("--concurrency"),
        help="Episodes at a time." + ("" if default is not None else f" {shown}"),
    )


def _provider_timeout_option(what: str) -> Callable[[_F], _F]:
    """``--provider-timeout``, left to the provider's provisioning_timeout when not given."""
    return click.option(
        "--provider-timeout",
        type=float,
        default=None,
        metavar="S",
        help=f"Seconds one provisioning or one oracle read may take. [default: "
        f"{DEFAULTS.provider_timeout:g}, or the provider's provisioning_timeout{what}]",
    )


def _trials_option(default: int) -> Callable[[_F], _F]:
    return click.option(
        "--trials", type=int, default=default, show_default=True, callback=_positive_int("--trials")
    )


def _out_option(what: str = "Run directory.") -> Callable[[_F], _F]:
    return click.option(
        "--out", type=click.Path(path_type=Path), help=f"{what} [default: runs/<run-id>/]"
    )


_provider_option = click.option(
    "--provider",
    default=DEFAULTS.provider,
    show_default=True,
    help="Provider entry point or module:attribute.",
)
_force_option = click.option(
    "--force",
    is_flag=True,
    help="Replace the effectbench run directory given with --out (never any other folder).",
)
_quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress display.")
_no_report_option = click.option(
    "--no-report", is_flag=True, help="Do not write report.html (the HTML report)."
)


def _given(ctx: click.Context, name: str) -> bool:
    from click.core import ParameterSource

    return ctx.get_parameter_source(name) not in (
        ParameterSource.DEFAULT,
        ParameterSource.DEFAULT_MAP,
        None,
    )


@cli.command()
@_provider_option
@click.option(
    "--arm",
    "arms",
    multiple=True,
    help="Arm entry point or module:attribute, or a protocol agent 'exec:COMMAND' "
    "(also exec-each:, exec+browser:, exec-each+browser:; 'NAME=exec:...' names it); "
    f"repeat for several. [default: {', '.join(DEFAULTS.arms)}]",
)
@_trials_option(DEFAULTS.trials)
@_concurrency_option(None, "; a resume keeps the recorded one")
@click.option(
    "--task",
    "tasks",
    multiple=True,
    metavar="GLOB",
    help="Only tasks whose id matches (repeatable).",
)
@_out_option()
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
@_provider_timeout_option("")
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
    callback=_byte_size,
    metavar="BYTES",
    help="Bytes an arm may put into the log per episode (actions, model calls, its report's "
    "message), e.g. 4M or 512K; past it the episode is an agent failure. [default: 4M]",
)
@_force_option
@_quiet_option
@_no_report_option
@click.pass_context
def run(
    ctx: click.Context,
    provider: str,
    arms: tuple[str, ...],
    trials: int,
    concurrency: int | None,
    tasks: tuple[str, ...],
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
        _fail(flag_message(exc))
    resuming = resume is not None  # options not given on this command line: the recorded
    request = _request(
        provider=provider if not resuming or _given(ctx, "provider") else None,
        arms=arms or None,
        trials=trials if not resuming or _given(ctx, "trials") else None,
        task_globs=tasks or (None if resuming else ()),
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
        _fail(str(exc))


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
        _headline(result.metrics, result.run_dir)
    return int(ExitCode.SERVICE_LOST)


def _headline(metrics: Any, run_dir: Path) -> None:
    from effectbench.cli.console import format_headline

    _out(format_headline(metrics))
    _out(_where(run_dir))


def _where(run_dir: Path) -> str:
    """The run directory as an absolute path: by default it is created under runs/ in the
    current directory, which a relative path does not make obvious."""
    return f"run directory: {run_dir.absolute()}"


def _execute(quiet: bool, request: Any, options: Any) -> int:
    result = _run_with_progress(quiet, request, options)
    if result.already_complete:
        _out(f"run {result.run_id} is already complete; nothing to resume")
    lost = result.outcome.lost if result.outcome is not None else ()
    if lost:
        return _service_lost(lost, result)
    if result.interrupted:
        return _interrupted(
            result,
            "interrupted; the log is intact. Continue with: effectbench run --resume "
            f"{result.run_dir}",
        )
    _headline(result.metrics, result.run_dir)
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


def _not_a_run_dir(path: Path, command: str) -> str:
    """For a file given where a run directory belongs (often the log itself)."""
    if path.name == LOG_FILE:
        return (
            f"{path} is the event log, not its run directory; give the directory: effectbench "
            f"{command} {path.parent}"
        )
    return f"{path} is a file, not a run directory; give the directory that holds {LOG_FILE}"


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--allow-incomplete",
    is_flag=True,
    help="Also score a log that ends before its run finished or differs from the run's "
    "record of its end; `effectbench verify` will not call the result sound.",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    callback=_positive_int("--workers"),
    metavar="N",
    help="Processes that check and fold the log (1: one process; the artifacts are the "
    "same). [default: every usable core for a log of 8 MB or more, else 1]",
)
@_no_report_option
def rescore(run_dir: Path, allow_incomplete: bool, workers: int | None, no_report: bool) -> int:
    """Rebuild every derived artifact of RUN_DIR from its events.jsonl, keeping the run's
    record of how it ended."""
    import orjson

    from effectbench.audit.attest import attestations
    from effectbench.outputs.artifacts import rescore_artifacts

    if run_dir.exists() and not run_dir.is_dir():
        _fail(_not_a_run_dir(run_dir, "rescore"))
    if not run_dir.is_dir():
        _fail(f"run directory {run_dir} does not exist")
    if not RunDir(run_dir).log.is_file():
        _fail(f"{run_dir} holds no {LOG_FILE}; it is not a run directory")
    built = rescore_artifacts(
        run_dir, allow_incomplete=allow_incomplete, workers=workers, attest=attestations
    )
    if built.incomplete is not None:
        click.echo(
            f"effectbench: warning: {built.incomplete}; scored anyway, and "
            "`effectbench verify` will not call the run sound",
            err=True,
        )
    if not no_report and built.incomplete is None:
        # A report checks the log against the run's record, which an incomplete log fails.
        from effectbench.report import build_report

        build_report(run_dir)
    _headline(orjson.loads(built.metrics.read_bytes()), run_dir)
    return 0


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path),
    help="HTML file to write. [default: RUN_DIR/report.html]",
)
@click.option(
    "--episode",
    "episodes",
    multiple=True,
    metavar="ID",
    help="Also give this episode a drill-down (repeatable), beyond the sampled ones.",
)
@click.option(
    "--drill-limit",
    type=int,
    default=None,
    callback=_positive_int("--drill-limit"),
    help="Episodes with a drill-down before sampling starts. [default: 200]",
)
def report(
    run_dir: Path, out_path: Path | None, episodes: tuple[str, ...], drill_limit: int | None
) -> int:
    """Write RUN_DIR's report: one self-contained HTML file, from its artifacts and log."""
    from effectbench.report import build_report
    from effectbench.report.drill import DRILL_LIMIT

    if not run_dir.is_dir():
        _fail(f"run directory {run_dir} does not exist")
    if not RunDir(run_dir).log.is_file():
        _fail(f"{run_dir} holds no {LOG_FILE}; it is not a run directory")
    limit = DRILL_LIMIT if drill_limit is None else drill_limit
    written = build_report(run_dir, out_path, drill_limit=limit, episodes=episodes)
    _out(f"report: {written}")
    return 0


@cli.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path),
    default=Path("compare.html"),
    show_default=True,
    help="HTML file to write.",
)
def compare(run_dirs: tuple[Path, ...], out_path: Path) -> int:
    """Put runs of one pack side by side in one report, paired per task and trial."""
    from effectbench.report.compare import build_compare

    if len(run_dirs) < 2:
        _fail("give at least two run directories to compare")
    written = build_compare(list(run_dirs), out_path)
    _out(f"comparison: {written}")
    return 0


@cli.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--pack-fingerprint",
    "expected_pack",
    default=None,
    metavar="HEX",
    help="The published fingerprint (effectbench pack) the run or submission must have used.",
)
@click.option(
    "--require-isolated",
    is_flag=True,
    help="Reject a run or submission whose arms did not run isolated (run --isolate).",
)
def verify(path: Path, expected_pack: str | None, require_isolated: bool) -> int:
    """Check a run directory or a submission file: exit 1 listing every reason if unsound,
    3 if an arm measured too little (INCOMPLETE), 4 if sound but an arm ran uncontained
    (docs/exit-codes.md)."""
    from effectbench.verify.run_check import verify_run
    from effectbench.verify.submission import verify_submission

    if not path.exists():
        _fail(f"{path} does not exist; give a run directory or a submission file")
    check = verify_run if path.is_dir() else verify_submission
    report = check(path, expected_pack_fingerprint=expected_pack, require_isolated=require_isolated)
    for line in _verdict(report, path):
        _out(line)
    return int(report.status)


def _verdict(report: Any, path: Path) -> list[str]:
    """What verify prints: the verdict, its reasons, each arm's coverage, the notes. "sound"
    is printed only for a complete run; "sound, NOT contained" for one with an arm that
    ran uncontained."""
    from effectbench.core.exitcodes import ExitCode
    from effectbench.outputs.coverage import threshold_text

    status = report.status
    uncontained = ", ".join(report.uncontained)
    if status is ExitCode.FAILED:
        lines = [f"NOT sound: {path}", *(f"  - {r}" for r in report.reasons)]
    elif status is ExitCode.INCOMPLETE:
        least = "" if report.min_coverage is None else threshold_text(report.min_coverage)
        head = f"INCOMPLETE: {path} (an arm measured too little; minimum coverage {least})"
        lines = [head, *(f"  - {r}" for r in report.incomplete)]
        if uncontained:
            lines.append(f"  NOT contained: {uncontained}")
    elif status is ExitCode.NOT_CONTAINED:
        lines = [f"sound, NOT contained: {uncontained} ({path})"]
    else:
        lines = [f"sound: {path}"]
    lines += [f"  coverage: {c}" for c in report.coverage]
    lines += [f"  note: {n}" for n in report.notes]
    return lines


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--system", required=True, help="The arm of the run to submit.")
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path),
    required=True,
    help="Submission file to write.",
)
@click.option(
    "--allow-partial",
    is_flag=True,
    help="Also export an arm that scored nothing or less than the run's --min-coverage; the "
    "submission records it as partial and `effectbench verify` reports it INCOMPLETE.",
)
def export(run_dir: Path, system: str, out_path: Path, allow_partial: bool) -> int:
    """Write one arm of RUN_DIR as a leaderboard submission (docs/leaderboard.md); exit 3,
    writing nothing, when the arm measured too little (unless --allow-partial)."""
    from effectbench.core.exitcodes import ExitCode
    from effectbench.verify.export import PartialExport, export_submission

    if not RunDir(run_dir).log.is_file():
        _fail(f"{run_dir} holds no {LOG_FILE}; give a run directory")
    if out_path.exists():
        _fail(
            f"{out_path} already exists; choose another --out (a submission is never overwritten)"
        )
    try:
        written = export_submission(run_dir, system, out_path, allow_partial=allow_partial)
    except PartialExport as exc:
        for line in exc.lines:
            click.echo(f"effectbench: incomplete: {line}", err=True)
        click.echo(
            "effectbench: refusing to export a run that is not a result (exit 3); pass "
            "--allow-partial to export it as partial",
            err=True,
        )
        return int(ExitCode.INCOMPLETE)
    except OSError as exc:
        writing = exc.filename is not None and Path(os.fsdecode(exc.filename)) == out_path
        _fail(os_error_line(exc, "write to" if writing else "read"))
    _out(f"submission: {written} (check it with: effectbench verify {written})")
    return 0


def _plugins(group: str) -> int:
    from effectbench.run.registry import Registry, format_plugin_table

    results = Registry().load_all(group)
    if not results:
        _out(f"no {group} entry points installed")
        return 0
    _out(format_plugin_table(results))
    failed = [r.info.name for r in results if r.status == "failed"]
    if failed:  # the listing stays whole; the exit code tells a script something is broken
        click.echo(
            f"effectbench: {len(failed)} plugin(s) failed to load: {', '.join(failed)}", err=True
        )
        return 1
    return 0


@cli.command()
def providers() -> int:
    """List installed providers (distribution, version) and any that failed to load
    (exit 1 when any did)."""
    return _plugins("effectbench.providers")


@cli.command()
def arms() -> int:
    """List installed arms (distribution, version) and any that failed to load (exit 1
    when any did)."""
    return _plugins("effectbench.arms")


@cli.command()
@_concurrency_option(None)
@_out_option()
@_force_option
@_quiet_option
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
        _fail(f"the MockMed provider is not installed ({exc}); reinstall effectbench")
    from effectbench.run.options import RunOptions

    request = _request(
        provider=DEFAULTS.provider, arms=tuple(PINNED), trials=TRIALS, out=out, force=force
    )
    result = _run_with_progress(quiet, request, RunOptions(concurrency=concurrency))
    if result.interrupted:
        return _interrupted(result, f"interrupted; nothing was checked ({_where(result.run_dir)})")
    results_path = RunDir(result.run_dir).results
    rows_json = [
        orjson.loads(line) for line in results_path.read_bytes().splitlines() if line.strip()
    ]
    rows = reference_rows(PINNED, result.metrics, rows_json)
    _out(format_reference(rows))
    _out(_where(result.run_dir))
    bad = [r for r in rows if not r[4]]
    if bad:
        _out(f"{len(bad)} pinned value(s) differ: the harness no longer reproduces the anchor")
        return 1
    _out("all pinned values reproduced")
    return 0


@cli.command()
@click.option("--provider", required=True, help="Provider entry point or module:attribute.")
@_trials_option(DEFAULTS.audit_trials)
@_concurrency_option(DEFAULTS.audit_concurrency)
@click.option(
    "--task",
    "tasks",
    multiple=True,
    metavar="GLOB",
    help="Only tasks whose id matches (repeatable).",
)
@_out_option("Audit run directory.")
@_provider_timeout_option("")
@_force_option
def audit(
    provider: str,
    trials: int,
    concurrency: int,
    tasks: tuple[str, ...],
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
    )


@cli.command()
@_provider_option
@click.option(
    "--audit-evidence",
    "audit_dir",
    type=click.Path(path_type=Path),
    default=None,
    help=(
        "Run directory of an `effectbench audit` of this pack; attestations are re-derived from "
        "its log."
    ),
)
def pack(provider: str, audit_dir: Path | None) -> int:
    """Print the provider's public pack manifest (test-split tasks redacted) as JSON."""
    import orjson

    from effectbench.audit.pack import public_pack_manifest
    from effectbench.run.registry import Registry

    report = None
    if audit_dir is not None:
        from effectbench.audit.checks import audit_log

        if not RunDir(audit_dir).log.is_file():
            _fail(
                f"{audit_dir} holds no {LOG_FILE}; give the run directory of an effectbench audit"
            )
        report = audit_log(RunDir(audit_dir).log)
    manifest = public_pack_manifest(Registry().provider(provider), audit=report)
    _out(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode())
    return 0


from effectbench.scaffold.command import new as _new  # a module that imports only click

cli.add_command(_new)


def _user_error_types() -> tuple[type[BaseException], ...]:
    """Errors whose message is written for the user: shown as one line, exit 2. Every
    such type subclasses EffectBenchError (effectbench/core/errors.py)."""
    from effectbench.core.errors import EffectBenchError

    return (EffectBenchError,)


def flag_message(exc: OptionsError) -> str:
    """An options error in the command's words: the option's flag, then the rule."""
    if exc.option is None:
        return str(exc)
    return f"--{exc.option.replace('_', '-')} {exc.detail}"


def _leaf(exc: BaseException) -> BaseException:
    """The single error inside (nested) exception groups, if there is exactly one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        rv = cli.main(args=argv, prog_name="effectbench", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("effectbench: interrupted", err=True)
        return EXIT_INTERRUPTED
    except _NO_ARGS_IS_HELP as exc:  # bare `effectbench`: the help, as click prints it
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:
        where = (
            exc.ctx.command_path
            if isinstance(exc, click.UsageError) and exc.ctx is not None
            else "effectbench"
        )
        message = " ".join(exc.format_message().split())
        click.echo(f"{where}: error: {message} (see {where} --help)", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("effectbench: interrupted", err=True)
        return EXIT_INTERRUPTED
    except BaseException as raw:  # noqa: BLE001 - the one place every error becomes a line
        return _report(raw, debug)
    return int(rv) if isinstance(rv, int) else 0


_ERRNO_PHRASES: dict[int, str] = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOENT: "no such file or directory",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EISDIR: "it is a directory",
    errno.EEXIST: "it already exists",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "the file system is read-only",
    errno.ENAMETOOLONG: "the name is too long",
}


def os_error_line(err: OSError, verb: str = "access") -> str:
    """An OSError as a sentence ("cannot write to X: permission denied"), never
    "[Errno 13] Permission denied: 'X'"."""
    text = err.strerror or str(err) or type(err).__name__
    reason = _ERRNO_PHRASES.get(err.errno or 0) or text[:1].lower() + text[1:]
    if err.filename is None:
        return reason
    target = os.fsdecode(err.filename)
    if err.filename2 is not None:
        return f"cannot {verb} {target} or {os.fsdecode(err.filename2)}: {reason}"
    return f"cannot {verb} {target}: {reason}"


def _report(raw: BaseException, debug: bool) -> int:
    """One line for an error (exit 2 for the user's, 1 for ours); a traceback only with --debug."""
    err = _leaf(raw)
    if isinstance(err, KeyboardInterrupt):
        click.echo("effectbench: interrupted", err=True)
        return EXIT_INTERRUPTED
    if isinstance(err, SystemExit):
        raise err from None
    if debug:
        import traceback

        traceback.print_exception(raw)
    message = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err.__cause__, OptionsError):  # the API wraps it in a RunError
        message = flag_message(err.__cause__)
    if isinstance(err, OSError):
        message = os_error_line(err)
    if isinstance(err, (*_user_error_types(), OSError)):
        click.echo(f"effectbench: error: {message}", err=True)
        code = getattr(err, "exit_code", EXIT_USAGE)  # an error with its own (core/exitcodes.py)
        return int(code) if isinstance(code, int) else EXIT_USAGE
    click.echo(
        f"effectbench: internal error: {type(err).__name__}: {message} (rerun with --debug for a "
        "traceback)",
        err=True,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
