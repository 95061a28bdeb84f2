"""Old import path ``effectbench.judge``: the code lives in ``effectbench.scoring.judge``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.scoring.judge": (
            "judge",
            "judge_inserts",
            "row_matches",
            "same_value",
        ),
    },
)
