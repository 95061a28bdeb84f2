"""The per-episode byte budget for what an arm puts into the log.

An arm's actions, model calls and report message become log lines. Each is bounded on
its own (a protocol line is at most 1 MiB, an episode at most 10,000 actions), but
together they are not: 100 actions of 1 MB grow the log by 100 MB and the harness's
memory with it. So every episode gets a :class:`LogBudget` (``--agent-log-budget``,
4 MiB by default, docs/agent-protocol.md "Bounds") on its ``Telemetry``; the recorder
charges each action and model call as it is recorded and refuses the one that goes
past the budget, and the scheduler charges the report's message. An episode past its
budget is an ``agent`` failure; what it recorded within the budget stays in the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs
import orjson

__all__ = [
    "DEFAULT_LOG_BUDGET",
    "MAX_LOG_BUDGET",
    "MIN_LOG_BUDGET",
    "MODEL_CALL_BYTES",
    "LogBudget",
    "LogBudgetExceeded",
    "action_bytes",
]

DEFAULT_LOG_BUDGET: Final = 4 << 20
"""Bytes an episode's arm may put into the log: 4 MiB."""
MIN_LOG_BUDGET: Final = 1 << 10
MAX_LOG_BUDGET: Final = 1 << 30
MODEL_CALL_BYTES: Final = 64
"""What one model call counts: its share of the telemetry line (the sums and its latency)."""


class LogBudgetExceeded(Exception):
    """An arm put more into the log than its episode's budget allows."""


def action_bytes(kind: str, detail: Mapping[str, object]) -> int:
    """The bytes an action adds to the log: its kind and its detail as JSON."""
    try:
        body = orjson.dumps(detail, default=repr, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # the log writer repr()s what this cannot encode
        body = repr(dict(detail)).encode("utf-8", "replace")
    return len(kind.encode("utf-8", "replace")) + len(body)


@attrs.define
class LogBudget:
    """One episode's budget. ``charge`` counts bytes and raises once they pass ``limit``;
    ``exceeded`` then says why, for the episode's failure (even if the arm swallowed
    the exception)."""

    limit: int
    used: int = 0
    exceeded: str | None = None

    def charge(self, size: int, what: str) -> None:
        if self.exceeded is not None:
            raise LogBudgetExceeded(self.exceeded)
        self.used += size
        if self.used > self.limit:
            self.exceeded = (
                f"the arm put more than {self.limit} bytes into the log for one episode "
                f"(at {what}; raise --agent-log-budget to allow more)"
            )
            raise LogBudgetExceeded(self.exceeded)
