"""Old import path ``effectbench.console``: the code lives in ``effectbench.cli.console``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.cli.console": (
            "PlainProgress",
            "RichProgress",
            "RunningScore",
            "format_headline",
            "format_reference",
            "make_progress",
            "reference_rows",
        ),
    },
)
