"""What the ``effectbench`` commands share: the one-line usage error, their common
options and parameter checks, the lines they print about a run directory, and the
wording of option and OS errors. Imports only click at module level, as every command
module does (``effectbench --version`` must stay fast)."""

from __future__ import annotations

import errno
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from effectbench.core.rundir import LOG_FILE, RunDir
from effectbench.run.defaults import DEFAULTS, OptionsError

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "byte_size",
    "concurrency_option",
    "fail",
    "flag_message",
    "force_option",
    "headline",
    "no_report_option",
    "not_a_run_dir",
    "os_error_line",
    "out_option",
    "positive_int",
    "provider_option",
    "provider_timeout_option",
    "quiet_option",
    "run_dir_line",
    "say",
    "trials_option",
    "was_given",
]

EXIT_USAGE = 2


EXIT_INTERRUPTED = 130


_F = TypeVar("_F", bound=Callable[..., Any])


def fail(message: str) -> NoReturn:
    raise click.UsageError(message)


def say(text: str) -> None:
    click.echo(text)


def positive_int(name: str) -> Any:
    def check(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise click.BadParameter(f"must be a positive integer, got {value}", param_hint=name)
        return value

    return check


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def byte_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
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


def concurrency_option(default: int | None, note: str = "") -> Callable[[_F], _F]:
    """``--concurrency``; None leaves it to the provider's recommendation, else the default."""
    shown = f"[default: {DEFAULTS.concurrency}, or the provider's recommended_concurrency{note}]"
    return click.option(
        "--concurrency",
        type=int,
        default=default,
        show_default=default is not None,
        callback=positive_int("--concurrency"),
        help="Episodes at a time." + ("" if default is not None else f" {shown}"),
    )


def provider_timeout_option(what: str) -> Callable[[_F], _F]:
    """``--provider-timeout``, left to the provider's provisioning_timeout when not given."""
    return click.option(
        "--provider-timeout",
        type=float,
        default=None,
        metavar="S",
        help=f"Seconds one provisioning or one oracle read may take. [default: "
        f"{DEFAULTS.provider_timeout:g}, or the provider's provisioning_timeout{what}]",
    )


def trials_option(default: int) -> Callable[[_F], _F]:
    return click.option(
        "--trials",
        type=int,
        default=default,
        show_default=True,
        callback=positive_int("--trials"),
        help="Episodes of each task per arm (more trials narrow the intervals).",
    )


def limit_option(resume: str = "") -> Callable[[_F], _F]:
    """``--limit N`` as ``run`` and ``audit`` both take it (the plan cuts the selection)."""
    return click.option(
        "--limit",
        type=int,
        metavar="N",
        callback=positive_int("--limit"),
        help=f"Only the first N tasks of the selection, in pack order (a quick try){resume}. "
        "[default: all]",
    )


def out_option(what: str = "Run directory.") -> Callable[[_F], _F]:
    return click.option(
        "--out", type=click.Path(path_type=Path), help=f"{what} [default: runs/<run-id>/]"
    )


provider_option = click.option(
    "--provider",
    default=DEFAULTS.provider,
    show_default=True,
    help="Provider entry point or module:attribute.",
)


force_option = click.option(
    "--force",
    is_flag=True,
    help="Replace the effectbench run directory given with --out (never any other folder).",
)


quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress display.")


no_report_option = click.option(
    "--no-report", is_flag=True, help="Do not write report.html (the HTML report)."
)


def was_given(ctx: click.Context, name: str) -> bool:
    from click.core import ParameterSource

    return ctx.get_parameter_source(name) not in (
        ParameterSource.DEFAULT,
        ParameterSource.DEFAULT_MAP,
        None,
    )


def headline(metrics: Any, run_dir: Path) -> None:
    from effectbench.cli.console import format_headline

    say(format_headline(metrics))
    say(run_dir_line(run_dir))
    report = RunDir(run_dir).report
    if report.is_file():  # --no-report writes none
        say(f"report: {report.absolute()}")
    runs = shlex.quote(str(run_dir.absolute().parent))
    say(f"view it with the other runs: effectbench view {runs}")


def run_dir_line(run_dir: Path) -> str:
    """The run directory as an absolute path: by default it is created under runs/ in the
    current directory, which a relative path does not make obvious."""
    return f"run directory: {run_dir.absolute()}"


def not_a_run_dir(path: Path, command: str) -> str:
    """For a file given where a run directory belongs (often the log itself)."""
    if path.name == LOG_FILE:
        return (
            f"{path} is the event log, not its run directory; give the directory: effectbench "
            f"{command} {path.parent}"
        )
    return f"{path} is a file, not a run directory; give the directory that holds {LOG_FILE}"


def flag_message(exc: OptionsError) -> str:
    """An options error in the command's words: the option's flag, then the rule."""
    if exc.option is None:
        return str(exc)
    return f"--{exc.option.replace('_', '-')} {exc.detail}"


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
