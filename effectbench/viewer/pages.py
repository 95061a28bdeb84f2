"""The viewer's two pages, rendered with the report's templates and stylesheet.

The index: one row per run and arm (a run whose artifacts cannot be read is one row
saying why), each count a link to ``<run>/episodes.html?arm=...&outcome=...``. An
episode page: its rows, each opening the report's drill-down (``report.html#ep<slot>``)
or, when served, one built on demand (``episode.html?id=...``). Links are relative, so
the same markup works served and from disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlencode

from effectbench.core.rundir import RunDir
from effectbench.core.versions import PACKAGE_VERSION
from effectbench.report.lists import FAILED_WHATS, OUTCOME_WHATS, list_anchor
from effectbench.report.render import render
from effectbench.viewer.episodes import FILTER_KEYS, EpisodeList, Filters
from effectbench.viewer.rows import episode_rows
from effectbench.viewer.runs import RunRow

__all__ = ["COLUMNS", "episodes_page", "href", "index_page", "report_list"]

COLUMNS: Final = (
    ("run", "run"),
    ("provider", "provider"),
    ("pack", "pack"),
    ("date", "date"),
    ("arm", "arm"),
    ("coverage", "coverage"),
    ("swer", "SWER"),
    ("over_halt", "over-halt"),
    ("task_success", "task success"),
    ("episodes", "episodes"),
)
METRICS: Final = (
    ("swer", "SWER", "SWER"),
    ("over_halt", "over-halt", "over-halt"),
    ("task_success", "task success", "success"),
)
"""(figure, heading, the outcome its count's episodes are filed under)."""


def href(name: str) -> str:
    """A run's folder (``a/b``) as a relative URL path, each segment quoted."""
    return quote(name, safe="/")


_WHAT_OF: Final = {
    "": "planned",
    "SWER": "swer",
    "failed": "failed",
    **OUTCOME_WHATS,
    **{f"failed: {c}": f"failed_{c}" for c in FAILED_WHATS},
}
"""An episode page's outcome filter -> the count of the report's list it matches."""


def report_list(filters: Filters) -> str | None:
    """The fragment of the report's list of these episodes (docs/report.md, "Links into a
    report"), or None when the filter is not one of its counts (no arm, or a category)."""
    what = _WHAT_OF.get(filters.outcome)
    if not filters.arm or what is None or filters.category:
        return None
    return list_anchor(filters.arm, what, task=filters.task or None)


def _query(values: Mapping[str, str]) -> str:
    return urlencode({k: v for k, v in values.items() if v})


def _asset(name: str) -> str:
    return resources.files("effectbench").joinpath(f"templates/report/{name}").read_text("utf-8")


def _common() -> dict[str, Any]:
    return {
        "version": PACKAGE_VERSION,
        "view_css": _asset("view.css"),
        "view_js": _asset("view.js"),
    }


def index_page(title: str, rows: Sequence[RunRow], *, served: bool) -> bytes:
    providers = sorted({r.provider for r in rows if r.provider})
    return _render(
        "view_index.html.j2",
        title=title,
        rows=list(rows),
        broken=sum(1 for r in rows if r.problem),
        providers=providers,
        columns=COLUMNS,
        metrics=METRICS,
        served=served,
        **_common(),
    )


def episodes_page(
    run: str, run_dir: Path, listing: EpisodeList, filters: Filters, *, served: bool
) -> bytes:
    depth = run.count("/") + 1
    return _render(
        "view_episodes.html.j2",
        run=run,
        up="../" * depth,
        has_report=RunDir(run_dir).report.is_file(),
        listing=listing,
        rows=episode_rows(listing.rows, run, _query, served),
        filters={k: getattr(filters, k) for k in FILTER_KEYS},
        filter_keys=FILTER_KEYS,
        report_list=report_list(filters),
        served=served,
        **_common(),
    )


def _render(template: str, **context: Any) -> bytes:
    return render(template, href=href, query=_query, **context)
