"""The event log: the one check of a line (lines.py), the writer, the streaming reader and
the chain verifier (reader.py).

This ``__init__`` is also the old module ``effectbench.log``: its names warn
(DeprecationWarning) and go in effectbench 0.3 (docs/deprecations.md). It imports nothing
until an old name is asked for, so importing ``effectbench.log.lines`` loads no reader.
"""

from effectbench.core.relocated import relocated

__getattr__, __dir__ = relocated(
    __name__,
    {
        "effectbench.log.reader": (
            "ChainReport",
            "LogEntry",
            "LogReader",
            "LogWriter",
            "TailState",
            "encode_line",
            "event_entry",
            "open_log_writer",
            "read_log",
            "scan_tail",
            "verify_log",
            "warn_torn_tail",
            "write_events_sync",
        ),
        "effectbench.log.lines": (
            "ChainBroken",
            "GENESIS_HASH",
            "LogCorrupt",
            "LogError",
            "LogSchemaError",
            "LoggedEvent",
        ),
    },
)
