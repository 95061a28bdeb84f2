"""Old import path ``effectbench.oracles.postgres_store``: the code lives in
``effectbench.postgres.store``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {"effectbench.postgres.store": ("WRITE_OPTIONS", "PostgresStore")},
)
