"""The options of a run in one frozen object (every default of one is in
``run/defaults.py``, re-exported here).

Messages name the option in words ("concurrency must be ..."), never a command-line
flag: ``OptionsError.option`` says which option it is, and the CLI names its flag.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final, TypeVar

import attrs

from effectbench.core.agentlog import MAX_LOG_BUDGET, MIN_LOG_BUDGET
from effectbench.core.prices import PriceTable
from effectbench.core.provider import SCREENSHOT_POLICIES, ScreenshotPolicy
from effectbench.run.defaults import DEFAULT_MIN_COVERAGE, DEFAULTS, Defaults, OptionsError

if TYPE_CHECKING:
    from effectbench.core.capabilities import ProviderCapabilities

__all__ = [
    "DEFAULTS",
    "DEFAULT_MIN_COVERAGE",
    "DEFAULT_OPTIONS",
    "MAX_CONCURRENCY",
    "Defaults",
    "OptionsError",
    "RunOptions",
]

MAX_CONCURRENCY: Final = 1_000_000


def _positive_seconds(value: float) -> bool:
    return value > 0 and math.isfinite(value)


@attrs.frozen
class RunOptions:
    """How a run executes (the CLI, the API and the scheduler use it); none of it is part
    of the plan hash.

    Three options may be left unasked (None): ``concurrency``, ``provider_timeout`` and
    ``min_coverage``. Then a resumed run keeps what it recorded, else the provider's
    recommendation applies (``recommending``), else ``DEFAULTS``; the properties of those
    names are the values in effect, the ``asked_*`` fields what the caller gave."""

    asked_concurrency: int | None = attrs.field(default=None, alias="concurrency")
    episode_timeout: float | None = None
    """Seconds an arm may run before the episode fails as ``agent``; None for no limit."""
    oracle_retries: int = DEFAULTS.oracle_retries
    """Re-reads after an unreadable oracle read (so up to 1 + N reads)."""
    oracle_backoff: float = DEFAULTS.oracle_backoff
    """Delay before the first re-read, doubled for each further one..."""
    oracle_backoff_max: float = DEFAULTS.oracle_backoff_max
    """... up to this many seconds, so many re-reads cost time linearly, not exponentially."""
    teardown_timeout: float = DEFAULTS.teardown_timeout
    """Seconds an episode's teardown (and, at the end, the provider's stop) may take."""
    asked_provider_timeout: float | None = attrs.field(default=None, alias="provider_timeout")
    """Seconds one ``provision`` call or one oracle read may take: a hung provider fails
    its episode (``environment``) or its read (re-read, then ``evaluation``) instead of
    holding a concurrency slot for ever."""
    handle_signals: bool = False
    """Stop gracefully on SIGINT/SIGTERM (only from the main thread; the CLI sets it)."""
    screenshots: ScreenshotPolicy = DEFAULTS.screenshots
    """Which screenshots arms record are kept: none, an episode's final one, or all."""
    browsers: int | None = None
    """Chromium processes for browser arms (None: ``default_browsers(concurrency)``)."""
    worker_timeout: float = DEFAULTS.worker_timeout
    """Seconds a Dask run may go without a live worker (or a reachable scheduler) before
    it stops: what was in flight is abandoned for ``--resume`` and the run ends with
    ExitCode.SERVICE_LOST."""
    prices: PriceTable | None = None
    """Prices a model call whose arm gave no cost, from its model and tokens
    (``cost_source = "price_table:<version>"``); None: such a cost stays unknown."""
    agent_log_budget: int = DEFAULTS.agent_log_budget
    """Bytes an arm may put into the log per episode (actions, model calls, the report's
    message; effectbench.core.agentlog): past it the episode fails as ``agent``."""

    asked_min_coverage: float | None = attrs.field(default=None, alias="min_coverage")
    """The least fraction of its planned episodes each arm must score for the run to be a
    result; recorded in run.started / run.resumed, where ``verify`` reads it."""
    isolate: bool | None = None
    """Protocol agents: None contains them where the host can, True requires it, False never."""
    executor: str = DEFAULTS.executor
    """Where episodes run (``--executor``): ``local``, ``dask://HOST:PORT``, ``dask-local:N``."""
    report: bool = True
    """Also write report.html once the artifacts are built."""
    recommended_concurrency: int | None = None
    """The provider's recommendation (``ProviderCapabilities``), used while none is asked."""
    recommended_provider_timeout: float | None = None
    """The provider's ``provisioning_timeout``, used while no provider timeout is asked."""

    @property
    def concurrency(self) -> int:
        """Episodes at a time: the asked, else the recommended, else the default."""
        return _first(self.asked_concurrency, self.recommended_concurrency, DEFAULTS.concurrency)

    @property
    def provider_timeout(self) -> float:
        """Seconds one ``provision`` or oracle read may take, in effect."""
        return _first(
            self.asked_provider_timeout,
            self.recommended_provider_timeout,
            DEFAULTS.provider_timeout,
        )

    @property
    def min_coverage(self) -> float:
        """The coverage threshold in effect (asked, else ``DEFAULTS.min_coverage``)."""
        return _first(self.asked_min_coverage, None, DEFAULTS.min_coverage)

    def recommending(self, caps: ProviderCapabilities) -> RunOptions:
        """These options with a provider's recommendations, which apply only where the
        caller asked for nothing (a resumed run's recorded concurrency counts as asked)."""
        return attrs.evolve(
            self,
            recommended_concurrency=caps.recommended_concurrency,
            recommended_provider_timeout=caps.provisioning_timeout,
        )

    def from_provider(self) -> dict[str, int | float]:
        """The values in effect that the provider recommended (run.started records them)."""
        taken: dict[str, int | float | None] = {}
        if self.asked_concurrency is None:
            taken["concurrency"] = self.recommended_concurrency
        if self.asked_provider_timeout is None:
            taken["provider_timeout"] = self.recommended_provider_timeout
        return {name: value for name, value in taken.items() if value is not None}

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


_T = TypeVar("_T")


def _first(asked: _T | None, recommended: _T | None, default: _T) -> _T:
    if asked is not None:
        return asked
    return default if recommended is None else recommended


DEFAULT_OPTIONS: Final = RunOptions()
"""Options that ask for nothing: every value from ``DEFAULTS``."""
