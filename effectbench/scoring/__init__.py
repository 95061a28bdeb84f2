"""Pure scoring: judge, classify, the episode labels and the statistics.

Old import path ``effectbench.scoring``: its names are re-exported lazily from their homes
(``SCORING_VERSION`` lives in ``effectbench.core.versions``).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "SCORING_VERSION": "effectbench.core.versions",
    "ProjectionError": "effectbench.projections.episodes",
    "fold_episode": "effectbench.projections.episodes",
    "project_episodes": "effectbench.projections.episodes",
    "classify": "effectbench.scoring.classify",
    "judge": "effectbench.scoring.judge",
    "row_matches": "effectbench.scoring.judge",
    "same_value": "effectbench.scoring.judge",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'effectbench.scoring' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
