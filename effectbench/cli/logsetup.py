"""structlog set-up for the CLI: diagnostics to stderr, human or JSON lines.

Results go to stdout and files; this is only for what the harness has to say about
itself (interrupts, torn log tails, plugin trouble). Configured once per process, by
the CLI; library callers keep whatever structlog configuration they have.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

LogFormat = Literal["console", "json"]


def configure(fmt: LogFormat = "console", *, verbosity: int = 0) -> None:
    """``verbosity`` 0 shows warnings and errors, 1 adds info, 2 and more add debug."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor
    if fmt == "json":
        shared.append(structlog.processors.format_exc_info)
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


__all__ = ["LogFormat", "configure"]
