"""The options of a run, and every default of a run, each in one frozen object.

Messages name the option in words ("concurrency must be ..."), never a command-line
flag: ``OptionsError.option`` says which option it is, and the CLI names its flag.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final, TypeVar

import attrs

from effectbench.core.agentlog import DEFAULT_LOG_BUDGET, MAX_LOG_BUDGET, MIN_LOG_BUDGET
from effectbench.core.errors import EffectBenchError
from effectbench.core.prices import PriceTable
from effectbench.core.provider import SCREENSHOT_POLICIES, ScreenshotPolicy

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


@attrs.frozen
class Defaults:
    """Every default of a run, spelled once: what runs when the request names nothing
    (and no resumed run recorded it), and how (``RunOptions`` defaults to these). The
    API, the CLI's ``--help`` and the audit read them here; nothing restates them."""

    provider: str = "mockmed"
    arms: tuple[str, ...] = ("screen_only", "effect_verified")
    trials: int = 10
    runs_root: str = "runs"
    """Where a run without ``--out`` gets its directory, ``<runs_root>/<run-id>/``."""
    concurrency: int = 32
    oracle_retries: int = 3
    oracle_backoff: float = 0.05
    oracle_backoff_max: float = 5.0
    teardown_timeout: float = 30.0
    provider_timeout: float = 60.0
    screenshots: ScreenshotPolicy = "all"
    worker_timeout: float = 60.0
    agent_log_budget: int = DEFAULT_LOG_BUDGET
    min_coverage: float = 0.9
    """The least coverage (scored / planned episodes) each arm needs for a run to be a
    result (docs/exit-codes.md): ``run`` exits INCOMPLETE below it, ``verify`` and
    ``export`` refuse. Also the threshold of a log that recorded none."""
    executor: str = "local"
    audit_trials: int = 2
    audit_concurrency: int = 16


DEFAULTS: Final = Defaults()
"""The defaults, for every front end (``--concurrency``'s default, ...)."""

DEFAULT_MIN_COVERAGE: Final = DEFAULTS.min_coverage

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
