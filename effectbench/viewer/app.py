"""The served viewer: a read-only ASGI app over one folder of runs (``effectbench view``).

GET and HEAD only. ``/`` is the index, built from the runs' artifacts on each request
(so a run that finishes meanwhile appears on reload); ``<run>/episodes.html`` is that
run's episode list, filtered by its query; ``<run>/episode.html?id=ID`` one episode's
drill-down and filmstrip, for an episode report.html did not sample; ``compare.html
?run=A&run=B`` two runs compared. Every other path is a file of the folder, through
``paths.inside`` (nothing outside it, nothing hidden). The pages built on demand are
the report's own (``build_report``, ``build_compare``), written to a private temporary
folder and served from memory: the viewer never writes under the folder it serves.
A request whose Host is not this machine's loopback name is refused, so a web page
cannot reach the runs by rebinding a DNS name to 127.0.0.1.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from effectbench.core.rundir import EPISODES_PAGE_FILE, LOG_FILE, RunDir
from effectbench.report.data import ReportError
from effectbench.viewer.episodes import Filters, episode_list
from effectbench.viewer.pages import episodes_page, index_page
from effectbench.viewer.paths import inside, url_parts
from effectbench.viewer.runs import run_rows

__all__ = ["EPISODE_PAGE", "viewer_app"]

EPISODE_PAGE: Final = "episode.html"
COMPARE_PAGE: Final = "compare.html"
_INDEX: Final = ("index.html",)
_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost"})
_HEADERS: Final = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def viewer_app(root: Path, title: str) -> Starlette:
    """The app serving ``root`` (its index titled ``title``, the folder as the user named it)."""
    base = root.resolve()

    def handle(request: Request) -> Response:
        if _host(request.headers.get("host", "")) not in _LOOPBACK:
            return _text(403, "this viewer answers only on 127.0.0.1 or localhost")
        return _route(base, title, request)

    return Starlette(routes=[Route("/{path:path}", handle, methods=["GET", "HEAD"])])


def _host(header: str) -> str:
    return header.rsplit(":", 1)[0] if not header.endswith("]") else header


def _route(base: Path, title: str, request: Request) -> Response:
    path = request.url.path
    parts = url_parts(path)
    if parts is None:
        return _text(404, f"{path} is outside the viewed folder; nothing there is served")
    if parts in ([], list(_INDEX)):
        return _page(index_page(title, run_rows(base), served=True))
    if parts == [COMPARE_PAGE]:
        return _compare(base, request.query_params.getlist("run"))
    if len(parts) > 1 and parts[-1] in (EPISODES_PAGE_FILE, EPISODE_PAGE):
        run = inside(base, "/".join(parts[:-1]))
        if run is not None and RunDir(run).log.is_file():
            name = "/".join(parts[:-1])
            if parts[-1] == EPISODE_PAGE:
                return _episode(run, request.query_params.get("id", ""))
            return _episodes(run, name, Filters.of(request.query_params))
    target = inside(base, path)
    if target is None or not target.is_file():
        return _text(404, f"{path} is not a file of the viewed folder; start from / (the index)")
    return FileResponse(target, headers=_HEADERS)


def _episodes(run: Path, name: str, filters: Filters) -> Response:
    try:
        listing = episode_list(run, filters)
    except ReportError as exc:
        return _text(409, str(exc))
    return _page(episodes_page(name, run, listing, filters, served=True))


def _episode(run: Path, episode_id: str) -> Response:
    from effectbench.report import build_report

    if not episode_id:
        return _text(400, "name the episode: episode.html?id=<arm>::<task_id>::t<trial>")
    return _built(lambda out: build_report(run, out, drill_limit=0, episodes=[episode_id]))


def _compare(base: Path, names: list[str]) -> Response:
    from effectbench.report.compare import build_compare

    if len(names) != 2:
        return _text(400, "name two runs: compare.html?run=A&run=B (from the index's form)")
    runs = [inside(base, n) for n in names]
    dirs = [r for r in runs if r is not None and RunDir(r).log.is_file()]
    if len(dirs) != 2:
        return _text(404, f"compare runs of this folder (each holds a {LOG_FILE}): {names}")
    return _built(lambda out: build_compare(dirs, out))


def _built(build: Callable[[Path], Path]) -> Response:
    """A report page written to a private temporary folder and served from memory."""
    with tempfile.TemporaryDirectory(prefix="effectbench-view-") as tmp:
        try:
            page = build(Path(tmp) / "page.html").read_bytes()
        except ReportError as exc:
            return _text(409, str(exc))
    return _page(page)


def _page(body: bytes) -> Response:
    return HTMLResponse(body, headers=_HEADERS)


def _text(status: int, line: str) -> Response:
    return PlainTextResponse(f"effectbench view: {line}\n", status_code=status, headers=_HEADERS)
