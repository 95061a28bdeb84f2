"""The options of a run: every default and its validation, in one frozen object.

Messages name the option in words ("concurrency must be ..."), never a command-line
flag: ``OptionsError.option`` says which option it is, and the CLI names its flag.
"""

from __future__ import annotations

import math
from typing import Final

import attrs

from effectbench.core.agentlog import DEFAULT_LOG_BUDGET, MAX_LOG_BUDGET, MIN_LOG_BUDGET
from effectbench.core.errors import EffectBenchError
from effectbench.core.prices import PriceTable
from effectbench.core.provider import SCREENSHOT_POLICIES, ScreenshotPolicy

__all__ = ["DEFAULTS", "DEFAULT_MIN_COVERAGE", "MAX_CONCURRENCY", "OptionsError", "RunOptions"]

MAX_CONCURRENCY: Final = 1_000_000
DEFAULT_MIN_COVERAGE: Final = 0.9
"""The least coverage (scored / planned episodes) each arm needs for a run to be a result
(docs/exit-codes.md): ``run`` exits INCOMPLETE below it, ``verify`` and ``export`` refuse.
Also the threshold of a log that recorded none (from before the option)."""

_WORDS: Final = {
    "concurrency": "concurrency",
    "oracle_retries": "the number of oracle re-reads",
    "episode_timeout": "the episode timeout",
    "provider_timeout": "the provider timeout",
    "screenshots": "the screenshot policy",
    "worker_timeout": "the worker timeout",
    "min_coverage": "the minimum coverage",
    "agent_log_budget": "the agent log budget",
}


class OptionsError(EffectBenchError, ValueError):
    """A run option out of range. ``option`` is the field (None for one without a flag)
    and ``detail`` the rule it breaks, so a front end can name the option its own way."""

    def __init__(self, option: str | None, detail: str) -> None:
        self.option = option
        self.detail = detail
        super().__init__(detail if option is None else f"{_WORDS[option]} {detail}")


def _positive_seconds(value: float) -> bool:
    return value > 0 and math.isfinite(value)


@attrs.frozen
class RunOptions:
    """How a run executes: every default in one place (the CLI, the API and the scheduler
    use it). None of them is part of the plan hash."""

    concurrency: int = 32
    episode_timeout: float | None = None
    """Seconds an arm may run before the episode fails as ``agent``; None for no limit."""
    oracle_retries: int = 3
    """Re-reads after an unreadable oracle read (so up to 1 + N reads)."""
    oracle_backoff: float = 0.05
    """Delay before the first re-read, doubled for each further one..."""
    oracle_backoff_max: float = 5.0
    """... up to this many seconds, so many re-reads cost time linearly, not exponentially."""
    teardown_timeout: float = 30.0
    """Seconds an episode's teardown (and, at the end, the provider's stop) may take."""
    provider_timeout: float = 60.0
    """Seconds one ``provision`` call or one oracle read may take: a hung provider fails
    its episode (``environment``) or its read (re-read, then ``evaluation``) instead of
    holding a concurrency slot for ever."""
    handle_signals: bool = False
    """Stop gracefully on SIGINT/SIGTERM (only from the main thread; the CLI sets it)."""
    screenshots: ScreenshotPolicy = "all"
    """Which screenshots arms record are kept: none, an episode's final one, or all."""
    browsers: int | None = None
    """Chromium processes for browser arms (None: ``default_browsers(concurrency)``)."""
    worker_timeout: float = 60.0
    """Seconds a Dask run may go without a live worker (or a reachable scheduler) before
    it stops: what was in flight is abandoned for ``--resume`` and the run ends with
    ExitCode.SERVICE_LOST."""
    prices: PriceTable | None = None
    """Prices a model call whose arm gave no cost, from its model and tokens
    (``cost_source = "price_table:<version>"``); None: such a cost stays unknown."""
    agent_log_budget: int = DEFAULT_LOG_BUDGET
    """Bytes an arm may put into the log per episode (actions, model calls, the report's
    message; effectbench.core.agentlog): past it the episode fails as ``agent``."""

    min_coverage: float = DEFAULT_MIN_COVERAGE
    """The least fraction of its planned episodes each arm must score for the run to be a
    result; recorded in run.started / run.resumed, where ``verify`` reads it."""

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise OptionsError(
                "concurrency",
                f"must be an integer from 1 to {MAX_CONCURRENCY}, got {self.concurrency}",
            )
        if self.oracle_retries < 0:
            raise OptionsError("oracle_retries", f"must be >= 0, got {self.oracle_retries}")
        if self.episode_timeout is not None and not _positive_seconds(self.episode_timeout):
            raise OptionsError(
                "episode_timeout",
                f"must be a finite, positive number of seconds, got {self.episode_timeout}",
            )
        if not MIN_LOG_BUDGET <= self.agent_log_budget <= MAX_LOG_BUDGET:
            raise OptionsError(
                "agent_log_budget",
                f"must be from {MIN_LOG_BUDGET} bytes (1K) to {MAX_LOG_BUDGET} bytes (1G), "
                f"got {self.agent_log_budget}",
            )
        if self.screenshots not in SCREENSHOT_POLICIES:
            raise OptionsError(
                "screenshots",
                f"must be one of {', '.join(SCREENSHOT_POLICIES)}, got {self.screenshots!r}",
            )
        if not (0.0 <= self.min_coverage <= 1.0):  # also refuses NaN
            raise OptionsError(
                "min_coverage", f"must be a fraction from 0 to 1, got {self.min_coverage}"
            )
        if not _positive_seconds(self.provider_timeout):
            raise OptionsError(
                "provider_timeout",
                f"must be a finite, positive number of seconds, got {self.provider_timeout}",
            )
        if not _positive_seconds(self.worker_timeout):
            raise OptionsError(
                "worker_timeout",
                f"must be a finite, positive number of seconds, got {self.worker_timeout}",
            )
        for what, value in (
            ("the oracle re-read backoff", self.oracle_backoff),
            ("the oracle re-read backoff limit", self.oracle_backoff_max),
        ):
            if not (value >= 0 and math.isfinite(value)):
                raise OptionsError(
                    None, f"{what} must be a finite number of seconds >= 0, got {value}"
                )

    def oracle_delay(self, attempt: int) -> float:
        """Seconds to wait before re-read number ``attempt`` (1 for the first re-read)."""
        return min(self.oracle_backoff * 2.0 ** min(attempt - 1, 64), self.oracle_backoff_max)


DEFAULTS: Final = RunOptions()
"""The defaults, for front ends that show them (``--concurrency``'s default, ...)."""
