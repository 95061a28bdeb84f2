"""Old import path ``effectbench.sql_oracle``: the code lives in ``effectbench.oracles.sqlite``.

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.oracles.sqlite": (
            "RowChange",
            "SnapshotDiff",
            "SqliteAllTablesOracle",
            "TableDiff",
            "connect_ro",
            "diff_snapshots",
            "outside_effect",
            "read_all_tables",
            "ro_uri",
            "user_tables",
        ),
    },
)
