"""What a sound run still cannot claim: notes the verifier prints beside its verdict.

A run can be sound (every label and figure re-derives from its log) and still too thin
for the comparison it reports. These notes come from the re-derived metrics, never
from the files under check, and never make a run unsound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from effectbench.projections.claims import MIN_TRIALS_PER_TASK

__all__ = ["claim_notes"]


def claim_notes(metrics: Mapping[str, Any]) -> list[str]:
    """One line per comparison that is not a comparative claim (SPEC 2.2)."""
    notes = []
    for c in metrics.get("comparisons") or ():
        least = c.get("min_pairs_per_task")
        if isinstance(least, int) and least < MIN_TRIALS_PER_TASK:
            notes.append(
                f"comparison {c.get('first')} - {c.get('second')} is not a comparative claim: "
                f"{least} paired trial(s) on its thinnest task, fewer than the "
                f"{MIN_TRIALS_PER_TASK} per task a comparison needs; rerun with --trials "
                f"{MIN_TRIALS_PER_TASK} or more"
            )
    return notes
