"""Which episodes get a drill-down, chosen while results.jsonl streams past.

A run of a million episodes shows a few hundred drill-downs, so the report keeps only
what the choice can use: per (arm, label) group, its first ``limit`` episodes in plan
order (no group can give more), the episodes asked for by id, and a count. Memory is
then bounded by groups x limit, whatever the run's size, and the choice is the same as
picking from the full list.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import attrs

from effectbench.report.errors import ReportError

__all__ = [
    "DRILL_LIMIT",
    "EpisodeRef",
    "EpisodeSample",
    "EpisodeSampler",
    "sample_of",
    "select_episodes",
]

DRILL_LIMIT: Final = 200
"""Episodes with a full drill-down in one report; more are sampled (the page says how)."""


@attrs.frozen
class EpisodeRef:
    """One results row, reduced to what selection and the episode index need."""

    slot: int
    episode_id: str
    arm: str
    task_id: str
    trial: int
    label: str


@attrs.frozen
class EpisodeSample:
    """What the selection needs of a run's episodes, gathered in one bounded pass."""

    limit: int
    total: int
    groups: tuple[tuple[EpisodeRef, ...], ...]
    """Per (arm, label) group in order of first appearance: its first ``limit`` episodes."""
    found: tuple[EpisodeRef, ...]
    """The episodes named by id that the run has, in plan order."""
    wanted: tuple[str, ...]

    def __len__(self) -> int:
        """The run's episode count (``RunData.episodes`` was once the full list)."""
        return self.total


@attrs.define
class EpisodeSampler:
    """Fed every results row in plan order; ``sample()`` gives the bounded summary."""

    limit: int
    wanted: frozenset[str] = frozenset()
    total: int = 0
    _groups: dict[tuple[str, str], list[EpisodeRef]] = attrs.field(factory=dict)
    _found: list[EpisodeRef] = attrs.field(factory=list)

    def add(self, ref: EpisodeRef) -> None:
        self.total += 1
        group = self._groups.setdefault((ref.arm, ref.label), [])
        if len(group) < self.limit:
            group.append(ref)
        if ref.episode_id in self.wanted:
            self._found.append(ref)

    def sample(self) -> EpisodeSample:
        return EpisodeSample(
            limit=self.limit,
            total=self.total,
            groups=tuple(tuple(g) for g in self._groups.values()),
            found=tuple(self._found),
            wanted=tuple(sorted(self.wanted)),
        )


def sample_of(
    episodes: Iterable[EpisodeRef], limit: int, wanted: Iterable[str] = ()
) -> EpisodeSample:
    """The sample of an in-memory list (what ``load_run`` gathers while it reads)."""
    sampler = EpisodeSampler(limit, frozenset(wanted))
    for ref in episodes:
        sampler.add(ref)
    return sampler.sample()


def select_episodes(
    episodes: EpisodeSample | Iterable[EpisodeRef], limit: int, wanted: Iterable[str] = ()
) -> tuple[list[EpisodeRef], str]:
    """Which episodes get a drill-down, and the sentence that says how they were chosen.

    Every episode when they fit. Otherwise each (arm, outcome) group in turn gives its
    next episode in plan order until ``limit`` is reached, so rare outcomes are always
    shown; episodes named in ``wanted`` are added on top. Deterministic. A sample must
    have been gathered with at least this ``limit`` and every id in ``wanted``."""
    want = list(dict.fromkeys(wanted))
    sample = episodes if isinstance(episodes, EpisodeSample) else sample_of(episodes, limit, want)
    if sample.limit < limit or not set(want) <= set(sample.wanted):
        raise ValueError("the sample was gathered for a smaller limit or other episode ids")
    known = {e.episode_id: e for e in sample.found}
    missing = [w for w in want if w not in known]
    if missing:
        raise ReportError(
            f"episode {missing[0]!r} is not in this run's results.jsonl; ids look like "
            "<arm>::<task_id>::t<trial>"
        )
    if sample.total <= limit:
        every = sorted((e for g in sample.groups for e in g), key=lambda e: e.slot)
        return every, f"All {sample.total} episodes have a drill-down."
    chosen: dict[int, EpisodeRef] = {}
    for depth in range(limit):
        took = False
        for group in sample.groups:
            if depth < len(group) and len(chosen) < limit:
                chosen[group[depth].slot] = group[depth]
                took = True
        if not took or len(chosen) >= limit:
            break
    for w in want:
        chosen[known[w].slot] = known[w]
    picked = [chosen[s] for s in sorted(chosen)]
    note = (
        f"Sampled: {len(picked)} of {sample.total} episodes have a drill-down "
        f"(limit {limit}): each arm and outcome in turn gives its next episode in plan "
        "order, so every outcome is represented. `effectbench report RUN_DIR --episode ID` "
        "adds any other episode; results.jsonl lists them all."
    )
    return picked, note
