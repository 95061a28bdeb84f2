"""Chart geometry, computed here so the template only draws (inline SVG, no JS library).

A chart is rows of marks on one 0-100% axis: a dot (its shape names the metric, so
the chart reads without colour) with a whisker for the 95% interval and the value
written beside it, or a hatched bar between two values (the screen-task gap).
Coordinates are rounded to 0.1 px, so the same numbers always give the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import attrs

from effectbench.report.data import Gap, Rate

__all__ = ["Chart", "Mark", "dot_chart", "pct", "rate_text"]

LABEL_W: Final = 150.0
PLOT_W: Final = 360.0
VALUE_W: Final = 240.0
ROW_H: Final = 22.0
TOP: Final = 18.0
_GLYPHS: Final = {"circle": "\u25cf", "triangle": "\u25b2", "square": "\u25a0", "diamond": "\u25c6"}
SHAPES: Final = {
    "SWER": "circle",
    "over-halt": "triangle",
    "task success": "square",
    "screen success": "diamond",
}


def pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100.0 * x:.{digits}f}%"


def rate_text(r: Rate) -> str:
    """``50/90 55.6% [45.3%, 65.5%]``: what every table and chart label says for a rate."""
    return f"{r.numerator}/{r.denominator} {rate_tail(r)}"


def rate_tail(r: Rate) -> str:
    """``55.6% [45.3%, 65.5%]``: a rate after its counts (which a table prints as links)."""
    interval = "" if r.lo is None or r.hi is None else f" [{pct(r.lo)}, {pct(r.hi)}]"
    return f"{pct(r.value)}{interval}"


def gap_text(g: Gap) -> str:
    if g.value is None:
        return "n/a"
    interval = "" if g.lo is None or g.hi is None else f" [{_pp(g.lo)}, {_pp(g.hi)}]"
    return f"{_pp(g.value)}{interval}"


def _pp(x: float) -> str:
    return f"{100.0 * x:+.1f} pp"


@attrs.frozen
class Mark:
    """One chart row. ``kind``: dot (x, lo, hi) or bar (from x0 to x)."""

    y: float
    label: str
    kind: str
    shape: str
    x: float | None
    x0: float | None
    lo: float | None
    hi: float | None
    text: str
    path: str = ""
    """The marker's outline (SVG path data), for a dot."""


@attrs.frozen
class Chart:
    title: str
    width: float
    height: float
    plot_x: float
    plot_w: float
    axis_y: float
    ticks: tuple[tuple[float, str], ...]
    marks: tuple[Mark, ...]
    legend: str = ""
    """The marks' key in words (shapes used, whiskers, the hatched bar when drawn)."""


def _x(v: float | None) -> float | None:
    if v is None:
        return None
    return round(LABEL_W + PLOT_W * min(1.0, max(0.0, v)), 1)


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def marker_path(shape: str, x: float, y: float) -> str:
    """SVG path data of a marker centred on (x, y): circle, triangle, square or diamond."""
    if shape == "circle":
        return f"M{_f(x - 5)} {_f(y)}a5 5 0 1 0 10 0a5 5 0 1 0 -10 0Z"
    if shape == "triangle":
        return f"M{_f(x)} {_f(y - 6)}L{_f(x + 6)} {_f(y + 5)}L{_f(x - 6)} {_f(y + 5)}Z"
    if shape == "square":
        return f"M{_f(x - 5)} {_f(y - 5)}h10v10h-10Z"
    return f"M{_f(x)} {_f(y - 6)}L{_f(x + 6)} {_f(y)}L{_f(x)} {_f(y + 6)}L{_f(x - 6)} {_f(y)}Z"


def _dot(y: float, label: str, r: Rate, shape: str) -> Mark:
    y = round(y, 1)
    x = _x(r.value)
    path = "" if x is None else marker_path(shape, x, y)
    return Mark(y, label, "dot", shape, x, None, _x(r.lo), _x(r.hi), rate_text(r), path)


def _bar(y: float, label: str, g: Gap, task: float | None, screen: float | None) -> Mark:
    return Mark(round(y, 1), label, "bar", "hatch", _x(screen), _x(task), None, None, gap_text(g))


def dot_chart(
    title: str,
    rows: Sequence[tuple[str, Rate | Gap, str]],
    *,
    gap_of: tuple[Rate, Rate] | None = None,
) -> Chart:
    """A chart of ``rows`` (label, value, shape name); a Gap row draws as a hatched bar
    from task success to screen success (``gap_of`` gives those two rates)."""
    marks = []
    for i, (label, value, shape) in enumerate(rows):
        y = TOP + ROW_H * i + ROW_H / 2
        if isinstance(value, Gap):
            task, screen = gap_of if gap_of is not None else (None, None)
            marks.append(
                _bar(
                    y,
                    label,
                    value,
                    None if task is None else task.value,
                    None if screen is None else screen.value,
                )
            )
        else:
            marks.append(_dot(y, label, value, shape))
    axis_y = round(TOP + ROW_H * len(rows) + 4, 1)
    used = {m.shape for m in marks}
    key = [f"{_GLYPHS[shape]} {name}" for name, shape in SHAPES.items() if shape in used]
    legend = "Shapes: " + ", ".join(key) + "; whiskers are 95% intervals"
    if "hatch" in used:
        legend += "; the hatched bar spans task success to screen success"
    ticks = tuple((_x(t / 4) or 0.0, f"{25 * t}%") for t in range(5))
    return Chart(
        title=title,
        width=LABEL_W + PLOT_W + VALUE_W,
        height=round(axis_y + 18, 1),
        plot_x=LABEL_W,
        plot_w=PLOT_W,
        axis_y=axis_y,
        ticks=ticks,
        marks=tuple(marks),
        legend=legend + ".",
    )


def headline_chart(
    arm: str, swer: Rate, over_halt: Rate, task: Rate, screen: Rate, gap: Gap
) -> Chart:
    """SWER beside over-halt, task and screen success, and the gap between the last two."""
    return dot_chart(
        f"{arm}: SWER, over-halt, task and screen success (95% Wilson intervals)",
        [
            ("SWER", swer, SHAPES["SWER"]),
            ("over-halt", over_halt, SHAPES["over-halt"]),
            ("task success", task, SHAPES["task success"]),
            ("screen success", screen, SHAPES["screen success"]),
            ("gap screen - task", gap, "hatch"),
        ],
        gap_of=(task, screen),
    )
