"""Old import path ``effectbench._logging``: the code lives in ``effectbench.cli.logsetup``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.cli.logsetup": (
            "LogFormat",
            "configure",
        ),
    },
)
