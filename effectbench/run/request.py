"""What to run: ``RunRequest`` (provider, arms, trials, tasks, where, resume), validated
when it is built, and the keyword form of the API mapped onto it and ``RunOptions``.

A field left None means "not asked": a resume takes it from the recorded plan, anything
else from ``DEFAULTS``. The API and the CLI build the same two objects.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypedDict

import attrs

from effectbench.core.arm import Arm
from effectbench.core.errors import EffectBenchError
from effectbench.core.prices import PriceTable, load_prices
from effectbench.core.provider import BenchmarkProvider
from effectbench.run.options import DEFAULTS, OptionsError, RunOptions
from effectbench.run.plan import PlanError

__all__ = [
    "ArmLike",
    "EvaluateKeywords",
    "ProviderLike",
    "RunError",
    "RunKeywords",
    "RunRequest",
    "with_keywords",
]

ArmLike = Arm | str
ProviderLike = BenchmarkProvider | str


class RunError(EffectBenchError):
    """A run that cannot start or continue as asked; the message says what to do."""


def _arm_tuple(items: Iterable[ArmLike] | None) -> tuple[ArmLike, ...] | None:
    return None if items is None else tuple(items)


def _glob_tuple(items: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if items is None else tuple(items)


def _optional_path(path: str | os.PathLike[str] | None) -> Path | None:
    return None if path is None else Path(path)


@attrs.frozen
class RunRequest:
    """What a run is: its provider, arms, trials and tasks, and where it is written.

    ``provider``, ``arms``, ``trials``, ``task_globs`` and ``limit`` left None come from
    the recorded plan on a ``resume`` (given ones must match it), else from ``DEFAULTS``
    (no limit). ``out`` None
    writes ``<runs_root>/<run-id>/``; ``force`` replaces only an effectbench run
    directory. ``provider_options`` (``{"pg-dsn": ...}``) go to the provider's
    ``preflight``, before anything is written."""

    provider: ProviderLike | None = None
    arms: tuple[ArmLike, ...] | None = attrs.field(default=None, converter=_arm_tuple)
    trials: int | None = None
    task_globs: tuple[str, ...] | None = attrs.field(default=None, converter=_glob_tuple)
    limit: int | None = None
    """The first ``limit`` tasks of the selection, in pack order; None: all of them (on a
    resume: the recorded limit, which a given one must equal)."""
    resume: Path | None = attrs.field(default=None, converter=_optional_path)
    out: Path | None = attrs.field(default=None, converter=_optional_path)
    force: bool = False
    runs_root: Path = attrs.field(default=Path(DEFAULTS.runs_root), converter=Path)
    provider_options: Mapping[str, str] = attrs.field(factory=dict, converter=dict)

    def __attrs_post_init__(self) -> None:
        if self.trials is not None and (isinstance(self.trials, bool) or self.trials < 1):
            raise PlanError(f"--trials must be a positive integer, got {self.trials}")
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 1):
            raise PlanError(f"--limit must be a positive integer, got {self.limit}")
        if self.resume is not None and self.out is not None:
            raise RunError("--resume continues the run in its own directory; drop --out")
        if self.resume is not None and self.force:
            raise RunError("--force replaces a run directory and cannot be combined with --resume")

    def settled(self) -> RunRequest:
        """The request with every field it left open taken from ``DEFAULTS``."""
        return attrs.evolve(
            self,
            provider=DEFAULTS.provider if self.provider is None else self.provider,
            arms=DEFAULTS.arms if self.arms is None else self.arms,
            trials=DEFAULTS.trials if self.trials is None else self.trials,
            task_globs=self.task_globs or (),
        )


class _RequestKeywords(TypedDict, total=False):
    trials: int | None
    task_globs: Sequence[str] | None
    limit: int | None
    out: str | os.PathLike[str] | None
    resume: str | os.PathLike[str] | None
    force: bool
    runs_root: str | os.PathLike[str]
    provider_options: Mapping[str, str] | None


class EvaluateKeywords(_RequestKeywords, total=False):
    """The keywords ``evaluate`` and ``evaluate_provider`` take besides their arms and
    provider: the ``RunRequest`` fields above, then the ``RunOptions`` ones."""

    concurrency: int | None
    episode_timeout: float | None
    oracle_retries: int
    oracle_backoff: float
    provider_timeout: float | None
    screenshots: str
    isolate: bool | None
    handle_signals: bool
    report: bool
    executor: str
    prices: PriceTable | str | os.PathLike[str] | None
    worker_timeout: float
    min_coverage: float | None
    agent_log_budget: int


class RunKeywords(EvaluateKeywords, total=False):
    """Every keyword ``execute`` takes (its form from before ``RunRequest``)."""

    provider: ProviderLike | None
    arms: Sequence[ArmLike] | None


_REQUEST_KEYS: Final = frozenset({"provider", "arms", *_RequestKeywords.__annotations__})


def with_keywords(
    request: RunRequest, options: RunOptions, keywords: RunKeywords
) -> tuple[RunRequest, RunOptions]:
    """``request`` and ``options`` with the keyword form's values put over them. A bad
    option is a RunError whose cause (an OptionsError) names it, so the CLI can say its
    flag; a ``prices`` file is loaded here (PriceTableError before anything is written)."""
    given: dict[str, Any] = dict(keywords)
    if given.get("provider_options") is None:
        given.pop("provider_options", None)
    prices = given.pop("prices", None)
    asked = {k: v for k, v in given.items() if k in _REQUEST_KEYS}
    how = {k: v for k, v in given.items() if k not in _REQUEST_KEYS}
    try:
        options = attrs.evolve(options, **how)
    except OptionsError as exc:
        raise RunError(str(exc)) from exc  # the cause names the option for the CLI
    if prices is not None:
        table = prices if isinstance(prices, PriceTable) else load_prices(prices)
        options = attrs.evolve(options, prices=table)
    return attrs.evolve(request, **asked), options
