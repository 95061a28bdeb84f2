"""Pure scoring: judge, classify, the episode labels and the statistics (one module each).

This ``__init__`` is also the old module ``effectbench.scoring``, "the public scoring
surface": its names warn (DeprecationWarning) and go in effectbench 0.3
(docs/deprecations.md). It imports nothing until an old name is asked for, so importing
``effectbench.scoring.judge`` does not load the projections that ``fold_episode`` lives in.
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.core.versions": ("SCORING_VERSION",),
        "effectbench.projections.episodes": (
            "ProjectionError",
            "fold_episode",
            "project_episodes",
        ),
        "effectbench.scoring.classify": ("classify",),
        "effectbench.scoring.judge": ("judge", "row_matches", "same_value"),
    },
)
