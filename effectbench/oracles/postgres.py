"""Old import path ``effectbench.oracles.postgres``: the code lives in
``effectbench.postgres.oracle``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.postgres.oracle": (
            "BEGIN",
            "CONNECT_TIMEOUT_S",
            "SESSION_OPTIONS",
            "SYSTEM_SCHEMAS",
            "PostgresOracle",
            "connect",
            "iso_datetime",
            "json_value",
            "quote_ident",
            "table_key",
        ),
    },
)
