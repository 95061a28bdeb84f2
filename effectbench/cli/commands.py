"""The ``effectbench`` command.

The group and its error handling; the commands live by group in ``run_commands``
(run, reference, audit), ``run_dir_commands`` (rescore, report, compare, verify, export)
and ``plugin_commands`` (providers, arms, pack), and their names stay importable from
here. Imports nothing heavy at module level (``effectbench --version`` must stay fast):
every command imports what it needs when it runs. User errors print one line on stderr and
exit with code 2; a traceback appears only with ``--debug``.
"""

from __future__ import annotations

import sys

import click

from effectbench.cli.common import EXIT_INTERRUPTED, EXIT_USAGE, flag_message, os_error_line
from effectbench.cli.doctor import doctor
from effectbench.cli.plugin_commands import arms, pack, providers, tasks
from effectbench.cli.run_commands import audit, reference, run
from effectbench.cli.run_dir_commands import compare, export, report, rescore, verify
from effectbench.cli.view_command import view
from effectbench.core.versions import PACKAGE_VERSION
from effectbench.run.defaults import OptionsError
from effectbench.scaffold.command import new  # a module that imports only click

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "arms",
    "audit",
    "cli",
    "compare",
    "doctor",
    "export",
    "flag_message",
    "main",
    "os_error_line",
    "pack",
    "providers",
    "reference",
    "report",
    "rescore",
    "run",
    "tasks",
    "verify",
    "view",
]

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


for _command in (run, reference, audit, rescore, report, compare, verify, export, providers):
    cli.add_command(_command)
for _command in (arms, tasks, pack, new, view, doctor):
    cli.add_command(_command)


def _user_error_types() -> tuple[type[BaseException], ...]:
    """Errors whose message is written for the user: shown as one line, exit 2. Every
    such type subclasses EffectBenchError (effectbench/core/errors.py)."""
    from effectbench.core.errors import EffectBenchError

    return (EffectBenchError,)


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
