"""Render a run (or several) to one self-contained HTML file.

jinja2 templates under effectbench/templates/report/; the stylesheet and the few
lines of script are inlined, charts are inline SVG, screenshots data URIs: the page
makes no request and opens from the file system. Output depends only on its inputs
(no clock, no random ids), so a rescore rewrites the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import Any, Final

from effectbench.projections.substrates import SUBSTRATE_COLUMNS, substrate_rows
from effectbench.report import charts
from effectbench.report.data import OUTCOME_COLUMNS, Rate
from effectbench.report.headline import DEFINITIONS, MIN_TRIALS
from effectbench.report.lists import list_anchor

__all__ = ["render"]

_TEMPLATE_DIR: Final = "templates/report"
_COUNT_WHATS: Final = {"success": "task_success", "failed": "failed"}
"""An outcome column's key -> the count list it links (the others are the same word)."""


def _resource(name: str) -> str:
    return resources.files("effectbench").joinpath(f"{_TEMPLATE_DIR}/{name}").read_text("utf-8")


@cache
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_resource),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(_FILTERS)
    env.globals.update(
        pct=charts.pct,
        rate_text=charts.rate_text,
        rate_tail=charts.rate_tail,
        anchor=list_anchor,
        count_whats=tuple(_COUNT_WHATS.get(key, key) for key, _ in OUTCOME_COLUMNS),
        definitions=DEFINITIONS,
        min_trials=MIN_TRIALS,
        gap_text=charts.gap_text,
        headline_chart=charts.headline_chart,
        cell_chart=_cell_chart,
        by_substrate=_by_substrate,
        substrates=SUBSTRATE_COLUMNS,
        outcome_columns=OUTCOME_COLUMNS,
        css=_resource("report.css"),
        js=_resource("report.js"),
    )
    return env


def _num(x: float | None, digits: int = 1) -> str:
    """A telemetry number; None is "no source" (nothing reported it), never 0."""
    return "no source" if x is None else f"{x:,.{digits}f}"


def _usd(x: float | None) -> str:
    return "no source" if x is None else f"${x:,.4f}"


def _exact(x: float | None) -> str:
    """A float as its shortest round-trip repr, for data attributes tests compare exactly."""
    return "" if x is None else repr(float(x))


def _short_category(c: str) -> str:
    return c.split("_", 1)[0] if c[:1] == "C" and c[1:2].isdigit() else c


def _cell_chart(arm: str, cells: Any) -> charts.Chart:
    rows: list[tuple[str, Rate, str]] = []
    for c in cells:
        where = f"{_short_category(c.category)} {c.substrate}"
        rows.append((f"{where} SWER", c.swer, charts.SHAPES["SWER"]))
        rows.append((f"{where} success", c.task_success, charts.SHAPES["task success"]))
    return charts.dot_chart(f"{arm}: SWER and task success per category x substrate", rows)


def _by_substrate(cells: Any) -> Any:
    """The arm's cells with the substrates as columns, or None for a one-substrate run."""
    return substrate_rows((c.category, c.substrate, c) for c in cells)


def _yes_no(v: bool | None) -> str:
    return "not covered" if v is None else ("yes" if v else "no")


_FILTERS: Final[Mapping[str, Callable[..., str]]] = {
    "num": _num,
    "usd": _usd,
    "exact": _exact,
    "short_category": _short_category,
    "yes_no": _yes_no,
}


def render(template: str, **context: Any) -> bytes:
    return str(_environment().get_template(template).render(**context)).encode("utf-8")
