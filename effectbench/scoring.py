"""The public scoring surface and its version.

SCORING_VERSION names the semantics of judge + classify + the episode fold. It is
stamped into every artifact a run or a rescore writes, so two results can be compared
only when it matches. Bump it like the spec: major when a verdict or label can change
for the same logged data, minor for additions that cannot, patch for wording.
"""

from __future__ import annotations

from typing import Final

from effectbench.classify import classify
from effectbench.judge import judge, row_matches, same_value
from effectbench.projections.episodes import ProjectionError, fold_episode, project_episodes

SCORING_VERSION: Final = "1.0.0"

__all__ = [
    "SCORING_VERSION",
    "ProjectionError",
    "classify",
    "fold_episode",
    "judge",
    "project_episodes",
    "row_matches",
    "same_value",
]
