"""``effectbench view [DIR]``: every run under DIR, served on 127.0.0.1 or written as pages.

Serving is the default (the index is rebuilt per request, on-demand comparisons and
drill-downs work); ``--static`` writes ``DIR/index.html`` and each run's episodes.html
instead. docs/viewer.md says what each page shows.
"""

from __future__ import annotations

from pathlib import Path

import click

from effectbench.cli.common import fail, say

__all__ = ["view"]


def _port(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None and not 0 <= value <= 65535:
        raise click.BadParameter(f"must be 0-65535, got {value}", param_hint="--port")
    return value


@click.command()
@click.argument("run_root", metavar="[DIR]", default="runs", type=click.Path(path_type=Path))
@click.option(
    "--serve/--static",
    default=True,
    help="Serve the viewer on 127.0.0.1 until Ctrl-C (the default), or write DIR/index.html "
    "and each run's episodes.html and exit.",
)
@click.option(
    "--port",
    type=int,
    default=None,
    callback=_port,
    metavar="N",
    help="Port on 127.0.0.1 to serve on. [default: a free one, printed]",
)
def view(run_root: Path, serve: bool, port: int | None) -> int:
    """Browse every run under DIR (default runs/): an index of their headline figures, each
    run's report, two runs compared, and episodes by arm, task, category and outcome."""
    if not run_root.is_dir():
        fail(f"{run_root} is not a folder; give the folder your runs are in (default runs/)")
    title = str(run_root).rstrip("/") or "/"
    if not serve:
        if port is not None:
            fail("--port is for the served viewer; leave it out with --static")
        return _write(run_root, title)
    return _serve(run_root, title, port or 0)


def _write(root: Path, title: str) -> int:
    from effectbench.viewer.static import write_static

    index, rows = write_static(root, title)
    broken = sum(1 for r in rows if r.problem)
    say(f"viewer: {index.resolve()} ({len(rows)} runs, {broken} unreadable)")
    return 0


def _serve(root: Path, title: str, port: int) -> int:
    import anyio

    try:
        anyio.run(_serve_until_stopped, root, title, port)
    except KeyboardInterrupt:
        pass
    say("viewer: stopped")
    return 0


async def _serve_until_stopped(root: Path, title: str, port: int) -> None:
    import signal

    import anyio

    from effectbench.report.errors import ReportError
    from effectbench.serve import serving
    from effectbench.viewer.app import viewer_app

    # Ctrl-C and SIGTERM are handled here, before the address is printed: a viewer
    # started in the background of a script inherits SIGINT ignored, and would otherwise
    # never stop on it (nor print that it stopped on a plain `kill`)
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        try:
            async with serving(viewer_app(root, title), label="viewer", port=port) as server:
                say(
                    f"viewer: {server.base_url} (serving {root.resolve()} read-only; "
                    "Ctrl-C stops it)"
                )
                async for _ in signals:
                    break
        except OSError as exc:
            raise ReportError(
                f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}; choose another "
                "--port or leave it out (a free one is chosen)"
            ) from None
