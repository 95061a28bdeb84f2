"""The commands that read a run directory (or a submission): ``rescore``, ``report``,
``compare``, ``verify`` and ``export``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from effectbench.cli.common import (
    fail,
    headline,
    no_report_option,
    not_a_run_dir,
    os_error_line,
    positive_int,
    say,
)
from effectbench.core.rundir import LOG_FILE, RunDir

__all__ = ["compare", "export", "report", "rescore", "verify"]


@click.command()
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
    callback=positive_int("--workers"),
    metavar="N",
    help="Processes that check and fold the log (1: one process; the artifacts are the "
    "same). [default: every usable core for a log of 8 MB or more, else 1]",
)
@no_report_option
def rescore(run_dir: Path, allow_incomplete: bool, workers: int | None, no_report: bool) -> int:
    """Rebuild every derived artifact of RUN_DIR from its events.jsonl, keeping the run's
    record of how it ended."""
    import orjson

    from effectbench.audit.attest import attestations
    from effectbench.outputs.artifacts import rescore_artifacts

    if run_dir.exists() and not run_dir.is_dir():
        fail(not_a_run_dir(run_dir, "rescore"))
    if not run_dir.is_dir():
        fail(f"run directory {run_dir} does not exist")
    if not RunDir(run_dir).log.is_file():
        fail(f"{run_dir} holds no {LOG_FILE}; it is not a run directory")
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
    headline(orjson.loads(built.metrics.read_bytes()), run_dir)
    return 0


@click.command()
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
    callback=positive_int("--drill-limit"),
    help="Episodes with a drill-down before sampling starts. [default: 200]",
)
def report(
    run_dir: Path, out_path: Path | None, episodes: tuple[str, ...], drill_limit: int | None
) -> int:
    """Write RUN_DIR's report: one self-contained HTML file, from its artifacts and log."""
    from effectbench.report import build_report
    from effectbench.report.drill import DRILL_LIMIT

    if not run_dir.is_dir():
        fail(f"run directory {run_dir} does not exist")
    if not RunDir(run_dir).log.is_file():
        fail(f"{run_dir} holds no {LOG_FILE}; it is not a run directory")
    limit = DRILL_LIMIT if drill_limit is None else drill_limit
    written = build_report(run_dir, out_path, drill_limit=limit, episodes=episodes)
    say(f"report: {written}")
    return 0


@click.command()
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
        fail("give at least two run directories to compare")
    written = build_compare(list(run_dirs), out_path)
    say(f"comparison: {written.absolute()}")
    return 0


@click.command()
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
        fail(f"{path} does not exist; give a run directory or a submission file")
    check = verify_run if path.is_dir() else verify_submission
    report = check(path, expected_pack_fingerprint=expected_pack, require_isolated=require_isolated)
    for line in _verdict(report, path):
        say(line)
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


@click.command()
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
        fail(f"{run_dir} holds no {LOG_FILE}; give a run directory")
    if out_path.exists():
        fail(f"{out_path} already exists; choose another --out (a submission is never overwritten)")
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
        fail(os_error_line(exc, "write to" if writing else "read"))
    say(f"submission: {written} (check it with: effectbench verify {written})")
    return 0
