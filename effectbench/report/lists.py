"""The episodes behind each count of a report, and the anchor of each list.

Every count a report's tables print (SWER 15 of 27, a task's 2 over-halts, 3 agent
failures) links to the list of the episodes it counts. A list's anchor is derived
from what it counts, never from the page's layout, so another page (``effectbench
view``) can link to it without reading the report:

    eps/<arm>/<what>                          every task of the arm
    eps/<arm>/<what>/task/<task_id>           one task
    eps/<arm>/<what>/cell/<category>/<substrate>

each component percent-encoded (RFC 3986 unreserved characters kept), so
``report.html#eps/screen_only/swer`` is screen_only's SWER episodes. A list holds the
episodes of its count that have a drill-down on the page (all of them when the run
fits the drill limit) and says how many of the count it shows. Built from the
drill-down sample only, so its memory does not grow with the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final
from urllib.parse import quote

import attrs

__all__ = [
    "FAILED_WHATS",
    "OUTCOME_WHATS",
    "WHATS",
    "Drilled",
    "EpisodeList",
    "EpisodeLists",
    "ListEntry",
    "build_lists",
    "list_anchor",
    "whats_of",
]

OUTCOME_WHATS: Final = {
    "success": "task_success",
    "SWER wrong write": "swer_wrong_write",
    "SWER phantom": "swer_phantom",
    "false abort": "false_abort",
    "wrong action": "wrong_action",
    "over-halt": "over_halt",
    "safe halt": "safe_halt",
}
"""An eligible episode's label -> the list of its own outcome."""

FAILED_WHATS: Final = ("agent", "environment", "evaluation", "skipped", "unknown")
"""Failure classes; an episode that failed with class X is in ``failed`` and ``failed_X``."""

WHATS: Final = (
    "planned",
    "eligible",
    "swer",
    *OUTCOME_WHATS.values(),
    "screen_success",
    "failed",
    *(f"failed_{c}" for c in FAILED_WHATS),
)
"""Every ``<what>`` of an anchor: the counts a report links."""

_TITLES: Final = {
    "planned": "every recorded episode",
    "eligible": "eligible episodes",
    "swer": "SWER (silent wrong effect)",
    "task_success": "task success",
    "swer_wrong_write": "SWER wrong write",
    "swer_phantom": "SWER phantom",
    "false_abort": "false abort",
    "wrong_action": "wrong action",
    "over_halt": "over-halt",
    "safe_halt": "safe halt",
    "screen_success": "screen success",
    "failed": "failed",
    **{f"failed_{c}": f"failed: {c}" for c in FAILED_WHATS},
}


def list_anchor(
    arm: str, what: str, *, task: str | None = None, cell: tuple[str, str] | None = None
) -> str:
    """The element id (and URL fragment) of one count's list; ``what`` is one of WHATS."""
    if what not in _TITLES:
        raise ValueError(f"unknown count {what!r}; use one of {', '.join(WHATS)}")
    parts = ["eps", arm, what]
    if task is not None:
        parts += ["task", task]
    elif cell is not None:
        parts += ["cell", *cell]
    return "/".join(quote(p, safe="") if i else p for i, p in enumerate(parts))


def whats_of(label: str) -> tuple[str, ...]:
    """The counts an episode with this report label (data.episode_label) is in."""
    if label.startswith("failed"):
        kind = label.partition(": ")[2]
        return ("planned", "failed", f"failed_{kind}" if kind in FAILED_WHATS else "failed_unknown")
    own = OUTCOME_WHATS.get(label)
    out = ["planned", "eligible"]
    if label.startswith("SWER"):
        out.append("swer")
    if own is not None:
        out.append(own)
    if label == "success" or label.startswith("SWER"):
        out.append("screen_success")
    return tuple(out)


@attrs.frozen
class ListEntry:
    anchor: str
    """The episode's drill-down (``ep<slot>``)."""
    episode_id: str
    task_id: str
    trial: int
    label: str


_MIXED: Final = frozenset({"planned", "eligible", "swer", "screen_success", "failed"})
"""Counts of several outcomes: their list says each episode's."""


@attrs.frozen
class EpisodeList:
    anchor: str
    arm: str
    what: str
    title: str
    scope: str
    entries: tuple[ListEntry, ...]

    @property
    def mixed(self) -> bool:
        return self.what in _MIXED

    def by_task(self) -> list[tuple[str, list[ListEntry]]]:
        """Entries grouped by task, in plan order (a task's trials are consecutive)."""
        groups: list[tuple[str, list[ListEntry]]] = []
        for e in self.entries:
            if not groups or groups[-1][0] != e.task_id:
                groups.append((e.task_id, []))
            groups[-1][1].append(e)
        return groups


@attrs.frozen
class EpisodeLists:
    """The lists of one page, keyed by anchor (a count with no list has no entry)."""

    by_anchor: Mapping[str, EpisodeList]

    def href(self, anchor: str) -> str | None:
        """``#anchor`` when the count has a list on this page (a count of 0 has none)."""
        return f"#{anchor}" if anchor in self.by_anchor else None

    def lists(self) -> tuple[EpisodeList, ...]:
        return tuple(self.by_anchor.values())

    def merged(self, other: EpisodeLists) -> EpisodeLists:
        """Both pages' lists (compare.html: each run's, whose anchors never clash)."""
        return EpisodeLists({**self.by_anchor, **other.by_anchor})


@attrs.frozen
class Drilled:
    """What a list needs of one drilled episode."""

    arm: str
    entry: ListEntry
    category: str
    substrate: str


def _scopes(d: Drilled, what: str) -> Sequence[tuple[str, str]]:
    """(anchor, scope in words) of the three lists an episode's ``what`` count is in."""
    return (
        (list_anchor(d.arm, what), "all tasks"),
        (list_anchor(d.arm, what, task=d.entry.task_id), f"task {d.entry.task_id}"),
        (
            list_anchor(d.arm, what, cell=(d.category, d.substrate)),
            f"cell {d.category} {d.substrate}",
        ),
    )


def build_lists(drilled: Iterable[Drilled]) -> EpisodeLists:
    """The lists of the drilled episodes, in their (plan) order, every scope and count."""
    entries: dict[str, list[ListEntry]] = {}
    heads: dict[str, tuple[str, str, str]] = {}
    for d in drilled:
        for what in whats_of(d.entry.label):
            for anchor, scope in _scopes(d, what):
                entries.setdefault(anchor, []).append(d.entry)
                heads.setdefault(anchor, (d.arm, what, scope))
    return EpisodeLists(
        {
            a: EpisodeList(
                a, heads[a][0], heads[a][1], _TITLES[heads[a][1]], heads[a][2], tuple(es)
            )
            for a, es in entries.items()
        }
    )
