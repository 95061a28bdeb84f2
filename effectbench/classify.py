"""Old import path ``effectbench.classify``: the code lives in ``effectbench.scoring.classify``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.scoring.classify": ("classify",),
    },
)
