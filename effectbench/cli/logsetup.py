"""structlog set-up for the CLI: diagnostics to stderr, human or JSON lines.

Results go to stdout and files; this is only for what the harness has to say about
itself (interrupts, torn log tails, plugin trouble). Configured once per process, by
the CLI; library callers keep whatever structlog configuration they have.

structlog is not imported to configure it: importing it pulls in rich (~0.3 s), which
most commands never need (``--help``, a rescore or verify of a sound log). ``configure``
applies the configuration now if something already imported structlog, and otherwise
the moment anything does (an import hook that removes itself), so every logger sees it
before its first line.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Literal

LogFormat = Literal["console", "json"]


PRODUCT_LOGGERS = ("uvicorn.error",)
"""Where a served product's own errors are logged (uvicorn's "Exception in ASGI
application" with the product's traceback): the product's, not the harness's, so they
go to the harness's log at debug level instead of the user's terminal."""


class _AtDebug(logging.Handler):
    """Hands a stdlib record on to structlog at debug level, traceback included."""

    def emit(self, record: logging.LogRecord) -> None:
        import structlog

        text = record.getMessage()
        if record.exc_info:
            text = f"{text}\n{logging.Formatter().formatException(record.exc_info)}"
        structlog.get_logger(record.name).debug(text)


def _route_product_logs() -> None:
    for name in PRODUCT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, _AtDebug) for h in logger.handlers):
            logger.addHandler(_AtDebug())
        logger.propagate = False  # else Python's last-resort handler prints it to stderr


def configure(fmt: LogFormat = "console", *, verbosity: int = 0) -> None:
    """``verbosity`` 0 shows warnings and errors, 1 adds info, 2 and more add debug."""
    _route_product_logs()
    for finder in [f for f in sys.meta_path if isinstance(f, _OnImport)]:
        sys.meta_path.remove(finder)
    if "structlog" in sys.modules:
        _apply(fmt, verbosity)
    else:
        sys.meta_path.insert(0, _OnImport(lambda: _apply(fmt, verbosity)))


def _apply(fmt: LogFormat, verbosity: int) -> None:
    import structlog

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
        renderer = structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty(), exception_formatter=_exception_formatter()
        )
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def _exception_formatter() -> Any:
    """Tracebacks never show the frames' locals (a DSN's password, an API key, an
    episode's token). On a terminal rich draws them; otherwise they are Python's own
    text, whose lines depend on neither the terminal's width nor the paths' length."""
    import structlog

    if sys.stderr.isatty() and importlib.util.find_spec("rich") is not None:
        return structlog.dev.RichTracebackFormatter(show_locals=False)
    return structlog.dev.plain_traceback


class _OnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``structlog`` is imported it lets the other finders
    load it, then runs ``then`` once the package has executed."""

    def __init__(self, then: Callable[[], None]) -> None:
        self.then = then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "structlog":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # the other finders, as without us
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _ThenLoader(spec.loader, self.then)
        return spec


class _ThenLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self.loader = loader
        self.then = then

    def __getattr__(self, name: str) -> Any:  # resource readers and the like
        return getattr(self.loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        # the package is in sys.modules and complete: configuring it imports nothing new
        self.then()


__all__ = ["LogFormat", "configure"]
