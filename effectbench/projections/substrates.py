"""The (category x substrate) cells pivoted: one row per category, one column per substrate.

metrics.json keeps one cell per (category, substrate) pair; a reader comparing how an arm
fares on the web, the desktop and a remote display wants the substrates side by side.
summary.md and report.html show this table only for a run whose cells span more than one
substrate (a web-only run's outputs are as they were).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, TypeVar

from effectbench.core.model import Substrate

__all__ = ["SUBSTRATE_COLUMNS", "substrate_rows"]

SUBSTRATE_COLUMNS: Final = tuple(s.value for s in Substrate)
"""Every substrate the spec names, in its order: web, desktop, remote_display."""

T = TypeVar("T")


def substrate_rows(cells: Iterable[tuple[str, str, T]]) -> list[tuple[str, list[T | None]]] | None:
    """(category, one entry per ``SUBSTRATE_COLUMNS``, None where the run has no such
    cell) for each category in first-seen order; None when the cells span one substrate."""
    table: dict[str, dict[str, T]] = {}
    seen: set[str] = set()
    for category, substrate, value in cells:
        table.setdefault(category, {})[substrate] = value
        seen.add(substrate)
    if len(seen) < 2:
        return None
    return [(c, [row.get(s) for s in SUBSTRATE_COLUMNS]) for c, row in table.items()]
