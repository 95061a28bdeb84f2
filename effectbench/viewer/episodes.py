"""A run's episodes from its results.jsonl, filtered by arm, task, category and outcome.

The outcome is the word the report files an episode under (``episode_label``: "success",
"SWER wrong write", "over-halt", "failed: environment", ...); a filter matches it whole
or as its first word, so ``SWER`` takes both kinds of silent wrong effect and
``failed`` every failure class. Which episodes the run's report.html has a drill-down
for is read from that file (its ``<details id="ep<slot>">``), so a link never points at
an anchor the page lacks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from effectbench.core.rundir import RunDir
from effectbench.report.data import episode_label, iter_results

__all__ = ["EPISODE_LIMIT", "FILTER_KEYS", "EpisodeList", "EpisodeRow", "Filters", "episode_list"]

EPISODE_LIMIT: Final = 2000
"""Rows an episode page lists; the page says how many more matched."""
FILTER_KEYS: Final = ("arm", "task", "category", "outcome")
_DRILLED: Final = re.compile(rb'<details class="ep" id="ep(\d+)"')


@attrs.frozen
class Filters:
    """What an episode list keeps; "" keeps everything."""

    arm: str = ""
    task: str = ""
    category: str = ""
    outcome: str = ""

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Filters:
        return cls(**{k: str(query.get(k) or "") for k in FILTER_KEYS})

    def keeps(self, row: EpisodeRow) -> bool:
        return (
            self.arm in ("", row.arm)
            and self.task in ("", row.task_id)
            and self.category in ("", row.category)
            and outcome_matches(self.outcome, row.outcome)
        )


def outcome_matches(wanted: str, label: str) -> bool:
    return wanted in ("", label) or label.startswith((f"{wanted} ", f"{wanted}:"))


@attrs.frozen
class EpisodeRow:
    slot: int
    episode_id: str
    arm: str
    task_id: str
    trial: int
    category: str
    outcome: str
    drilled: bool


@attrs.frozen
class EpisodeList:
    """The kept rows (at most ``EPISODE_LIMIT``), how many matched, how many the run has,
    and every value each filter can take (for the page's menus)."""

    rows: tuple[EpisodeRow, ...]
    matched: int
    total: int
    choices: Mapping[str, tuple[str, ...]]


def drilled_slots(run: Path) -> frozenset[int]:
    """The plan slots report.html has a drill-down for (none without a report)."""
    try:
        page = RunDir(run).report.read_bytes()
    except OSError:
        return frozenset()
    return frozenset(int(m) for m in _DRILLED.findall(page))


def episode_list(run: Path, filters: Filters, limit: int = EPISODE_LIMIT) -> EpisodeList:
    """Stream results.jsonl once; a ReportError (saying to rescore) when it is unreadable."""
    drilled = drilled_slots(run)
    kept: list[EpisodeRow] = []
    matched = total = 0
    seen: dict[str, dict[str, None]] = {k: {} for k in FILTER_KEYS}
    for slot, raw in enumerate(iter_results(RunDir(run).results)):
        row = _row(slot, raw, slot in drilled)
        total += 1
        for key, value in zip(FILTER_KEYS, _values(row), strict=True):
            seen[key][value] = None
        if filters.keeps(row):
            matched += 1
            if len(kept) < limit:
                kept.append(row)
    return EpisodeList(tuple(kept), matched, total, {k: tuple(v) for k, v in seen.items()})


def _values(row: EpisodeRow) -> Iterable[str]:
    return (row.arm, row.task_id, row.category, row.outcome)


def _row(slot: int, raw: Mapping[str, Any], drilled: bool) -> EpisodeRow:
    trial = raw.get("trial")
    return EpisodeRow(
        slot=slot,
        episode_id=str(raw.get("episode_id") or ""),
        arm=str(raw.get("arm") or ""),
        task_id=str(raw.get("task_id") or ""),
        trial=trial if isinstance(trial, int) else -1,
        category=str(raw.get("category") or ""),
        outcome=episode_label(raw),
        drilled=drilled,
    )
