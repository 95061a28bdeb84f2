"""``effectbench view --static``: the viewer's pages written beside the runs.

``DIR/index.html`` and, per readable run, ``DIR/<run>/episodes.html`` (the run's first
``STATIC_LIMIT`` episodes; the page's script applies the query a count's link carries).
Each goes through the report's ``write_page``, so a file effectbench did not write is
never replaced. A static page cannot build a comparison or a drill-down on demand; it
links to each run's report.html and names the command for the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import attrs

from effectbench.core.rundir import RunDir
from effectbench.report.data import ReportError
from effectbench.report.output import write_page
from effectbench.viewer.episodes import Filters, episode_list
from effectbench.viewer.pages import episodes_page, index_page
from effectbench.viewer.runs import RunRow, run_rows

__all__ = ["INDEX_FILE", "STATIC_LIMIT", "write_static"]

INDEX_FILE: Final = "index.html"
STATIC_LIMIT: Final = 5000


def write_static(root: Path, title: str) -> tuple[Path, list[RunRow]]:
    """Write the pages; (the index's path, every row, broken ones included)."""
    rows = [_episodes(root, row) for row in run_rows(root)]
    index = write_page(root / INDEX_FILE, index_page(title, rows, served=False))
    return index, rows


def _episodes(root: Path, row: RunRow) -> RunRow:
    """Write ``row``'s episode page; the row with a problem when its results cannot be read."""
    if row.problem is not None:
        return row
    run = root / row.name
    try:
        listing = episode_list(run, Filters(), STATIC_LIMIT)
        write_page(
            RunDir(run).episodes_page,
            episodes_page(row.name, run, listing, Filters(), served=False),
        )
    except ReportError as exc:
        return attrs.evolve(row, problem=str(exc))
    return row
