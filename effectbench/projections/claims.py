"""How much a comparison or a per-task figure can claim, from the shape of its evidence.

Two facts the numbers alone do not show. A comparison needs at least
``MIN_TRIALS_PER_TASK`` paired trials of every task before it is a comparative claim
(fewer says what happened, not that one arm is better). And when every trial of every
task came out the same for both arms, the outcomes are deterministic: a p-value
treats them as draws from a distribution they never were, so none is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

__all__ = ["FIXTURE_LEAD", "MIN_TRIALS_PER_TASK", "comparison_claim", "fixture_body", "identical"]

MIN_TRIALS_PER_TASK: Final = 3
"""Paired trials per task (per arm) a comparative claim needs (SPEC 2.2)."""


FIXTURE_LEAD: Final = "These figures are fixture invariants, not findings."
"""What a fixture's figures are (summary.md and the report both say it, from here)."""


def fixture_body(provider: str) -> str:
    """Why, for a provider that declares its pack a deterministic fixture (line breaks as
    summary.md prints them)."""
    return (
        f"Provider {provider} declares\n"
        "its pack a hand-built, deterministic fixture: the numbers reproduce exactly on every"
        " run,\n"
        "which makes them a regression anchor and says nothing empirical. Never quote them as\n"
        "evidence about agents or real systems."
    )


def identical(codes: Sequence[int]) -> bool:
    """Every trial has the same code (at least two trials: one trial shows no spread)."""
    return len(codes) >= 2 and all(c == codes[0] for c in codes)


def comparison_claim(pairs_by_task: Sequence[Sequence[tuple[int, int]]]) -> dict[str, Any]:
    """``min_pairs_per_task`` (eligible pairs of the task with the fewest),
    ``comparative_claim`` (every task has at least MIN_TRIALS_PER_TASK) and
    ``deterministic`` (every task's pairs are one repeated pair, for each arm)."""
    least = min((len(p) for p in pairs_by_task), default=0)
    deterministic = bool(pairs_by_task) and all(
        identical([x for x, _ in p]) and identical([y for _, y in p]) for p in pairs_by_task
    )
    return {
        "min_pairs_per_task": least,
        "comparative_claim": least >= MIN_TRIALS_PER_TASK,
        "deterministic": deterministic,
    }
