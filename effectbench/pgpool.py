"""Old import path ``effectbench.pgpool``: the code lives in ``effectbench.postgres.pool``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.postgres.pool": (
            "FINGERPRINT",
            "STRAY_EXIT_S",
            "Baseline",
            "DatabasePool",
            "PooledDatabase",
            "capture",
            "reset",
        ),
    },
)
