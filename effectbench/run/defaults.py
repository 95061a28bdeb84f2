"""Every default of a run in one frozen object, and the error a bad option raises.

Kept apart from ``run/options.py`` so the CLI can build its options' ``--help`` defaults
without importing the plugin types the options are checked against: ``effectbench
--version`` and every ``--help`` load this and nothing of ``core.model``. Messages name
the option in words ("concurrency must be ..."), never a command-line flag:
``OptionsError.option`` says which option it is, and the CLI names its flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from effectbench.core.agentlog import DEFAULT_LOG_BUDGET
from effectbench.core.errors import EffectBenchError

if TYPE_CHECKING:
    from effectbench.core.provider import ScreenshotPolicy

__all__ = ["DEFAULTS", "DEFAULT_MIN_COVERAGE", "Defaults", "OptionsError"]


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
