"""Old import path ``effectbench.records``: the code lives in ``effectbench.scoring.records``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.scoring.records": (
            "EpisodeRecord",
            "EpisodeTelemetry",
        ),
        "effectbench.core.model": (
            "Category",
            "FailureClass",
            "Outcome",
            "Substrate",
            "SwerVariant",
            "TrueState",
        ),
    },
)
