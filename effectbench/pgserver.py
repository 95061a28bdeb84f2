"""Old import path ``effectbench.pgserver``: the code lives in ``effectbench.postgres.server``
(the server) and ``effectbench.postgres.databases`` (one run's databases).

Every name warns (DeprecationWarning) and the path goes in effectbench 0.3
(docs/deprecations.md).
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.postgres.server": (
            "CONNECT_TIMEOUT_S",
            "DIR_ENV",
            "DSN_ENV",
            "MIN_MAJOR",
            "SERVER_SETTINGS",
            "SERVER_USER",
            "SOCKET_PATH_MAX",
            "EmbeddedServer",
            "PgConfigError",
            "ServerInfo",
            "bin_dir",
            "check_server",
            "default_root",
            "fits_socket",
            "reap_stale",
            "redact",
            "with_database",
        ),
        "effectbench.postgres.databases": (
            "ADMIN_POOL",
            "DRAIN_TIMEOUT_S",
            "LOCK_CLASS",
            "NAME_PREFIX",
            "Builder",
            "PgRun",
            "drop_orphans",
            "new_run_id",
        ),
    },
)
