"""The report's first section in plain words: what was run, which arm is better, and
what the numbers do and do not mean.

It computes no statistic. Every difference and interval is a paired comparison block
as metrics.json states it (or, for compare.html, as effectbench.projections.compare
gives it); the only reading added is which side of 0 the 95% interval lies on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from effectbench.projections.claims import FIXTURE_LEAD, MIN_TRIALS_PER_TASK, fixture_body

__all__ = ["DEFINITIONS", "Fixture", "Verdict", "fixture_of", "verdicts"]

DEFINITIONS: Final = (
    (
        "SWER",
        "Silent Wrong-Effect Rate",
        (
            "the share of eligible episodes where the agent reported success but the system "
            "of record does not hold the task's effect: something wrong was written (wrong "
            "write) or nothing was (phantom). Lower is better."
        ),
    ),
    (
        "over-halt",
        "over-halt",
        (
            "the share of eligible episodes where the agent stopped or refused although the "
            "task could be done safely. Lower is better. Read SWER with it: an agent that "
            "halts on everything has SWER 0."
        ),
    ),
    (
        "task success",
        "task success",
        (
            "the share of eligible episodes whose effect the record shows, checked by the "
            "oracle, not taken from the agent's word."
        ),
    ),
    (
        "screen success",
        "screen success",
        (
            "the share of eligible episodes where the agent's own report said it succeeded "
            "(task successes plus silent wrong effects)."
        ),
    ),
    (
        "gap",
        "screen success − task success",
        (
            "screen success minus task success over the same episodes (a paired interval): "
            "how far the agent's word overstates the record."
        ),
    ),
    (
        "eligible",
        "eligible",
        (
            "episodes with a scored outcome. Failed or unrun episodes are outside every rate "
            "and shown as coverage (eligible / planned)."
        ),
    ),
)
"""(short name, name spelled out, meaning) of every metric, where the page first uses it."""

METRICS: Final = (("swer", "SWER"), ("over_halt", "over-halt"))
"""The comparisons the headline reads, lower being better for both."""


@attrs.frozen
class Fixture:
    lead: str
    body: str


def fixture_of(manifest_fixture: bool, provider: str) -> Fixture | None:
    """summary.md's warning for a fixture pack (MockMed), from the same source."""
    return Fixture(FIXTURE_LEAD, fixture_body(provider)) if manifest_fixture else None


@attrs.frozen
class Verdict:
    """One paired comparison of one metric, read in words."""

    metric: str
    label: str
    first: str
    second: str
    difference: float | None
    lo: float | None
    hi: float | None
    pairs: int
    planned: int
    exact_p: float | None
    """None when the outcomes are deterministic (no p-value is given then)."""
    better: str | None
    """The arm with the lower rate when the interval excludes 0, else None."""
    claim: bool
    deterministic: bool
    min_pairs: int | None


def _verdict(c: Mapping[str, Any], metric: str, label: str) -> Verdict | None:
    block = c.get(metric)
    if not isinstance(block, Mapping):
        return None
    ci = block.get("ci95")
    lo, hi = (None, None) if not ci else (float(ci[0]), float(ci[1]))
    better = None
    if lo is not None and hi is not None:
        if hi < 0:
            better = str(c.get("first"))
        elif lo > 0:
            better = str(c.get("second"))
    deterministic = bool(c.get("deterministic"))
    mcnemar = block.get("mcnemar") or {}
    p = None if deterministic else mcnemar.get("exact_p")
    least = c.get("min_pairs_per_task")
    diff = block.get("difference")
    return Verdict(
        metric=metric,
        label=label,
        first=str(c.get("first")),
        second=str(c.get("second")),
        difference=None if diff is None else float(diff),
        lo=lo,
        hi=hi,
        pairs=int(c.get("pairs_eligible") or 0),
        planned=int(c.get("pairs_planned") or 0),
        exact_p=None if p is None else float(p),
        better=better,
        claim=c.get("comparative_claim") is not False,
        deterministic=deterministic,
        min_pairs=None if least is None else int(least),
    )


def verdicts(comparisons: Sequence[Mapping[str, Any]]) -> tuple[Verdict, ...]:
    """SWER and over-halt of every comparison block, in the blocks' order."""
    out = []
    for c in comparisons:
        for metric, label in METRICS:
            v = _verdict(c, metric, label)
            if v is not None:
                out.append(v)
    return tuple(out)


MIN_TRIALS: Final = MIN_TRIALS_PER_TASK
"""Paired trials per task a comparison needs before it says which arm is better."""
