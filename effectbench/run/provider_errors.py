"""A provider's own exceptions, seen once each: the traceback of the first occurrence of
every distinct error goes into the log and to the console, the repeats are counted.

A provider that crashes on every episode used to leave N one-line reasons in the log and
no traceback anywhere but the console; one that crashes in ``teardown`` or in an oracle
read left none at all. Now the first ``provision`` or ``teardown`` failure with a given
reason carries its traceback in ``episode.failed`` (``traceback``; the later ones do not),
and the console shows it: a provisioning error at the error level (always), one from
``teardown`` or an oracle read at the info level (``-v``). Tracebacks never hold the
frames' locals (they can hold secrets) and are cut to their last ``MAX_TRACEBACK``
characters.
"""

from __future__ import annotations

import traceback
from typing import Final

import attrs
import structlog

from effectbench.core.errors import one_line

__all__ = ["MAX_TRACEBACK", "ProviderErrors"]

MAX_TRACEBACK: Final = 8000
"""Characters of a traceback the log keeps (the end, where the provider's frame is)."""

log = structlog.get_logger("effectbench.run.scheduler")  # the name its stderr lines had


@attrs.define
class ProviderErrors:
    """Every distinct provider error of a run (by stage and one-line reason), counted."""

    seen: dict[tuple[str, str], int] = attrs.Factory(dict)

    def first(self, stage: str, exc: BaseException) -> str | None:
        """The traceback of ``exc`` when its error is new to this run (also shown on the
        console), else None (counted)."""
        key = (stage, one_line(exc))
        n = self.seen.get(key, 0)
        self.seen[key] = n + 1
        if n:
            return None
        show = log.error if stage == "provision" else log.info
        show("provider.error", phase=stage, error=key[1], exc_info=exc)
        text = "".join(traceback.format_exception(exc))
        return text[-MAX_TRACEBACK:]

    def report_repeats(self) -> None:
        """At the end of a run: how often each error recurred after its first showing."""
        for (stage, reason), n in self.seen.items():
            if n > 1:
                log.error(f"provider error {reason!r} ({stage}) occurred {n - 1} more time(s)")
