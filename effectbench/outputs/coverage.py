"""Whether a run measured enough to be a result: each arm's coverage against a threshold.

Coverage is an arm's scored (eligible) episodes over its planned ones, as metrics.json
states it. An arm that scored nothing, or whose coverage is below the run's
``--min-coverage``, is a *shortfall*: ``run`` exits INCOMPLETE naming it and its commonest
failure reason, ``verify`` does not call the run sound, and ``export`` refuses it unless
told ``--allow-partial`` (docs/exit-codes.md). The threshold a run recorded is read from
its log (run.started, then each run.resumed: the latest wins).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from effectbench.run.defaults import DEFAULT_MIN_COVERAGE

__all__ = [
    "ArmCoverage",
    "Shortfall",
    "arm_coverage",
    "commonest_failures",
    "recorded_threshold",
    "shortfalls",
    "threshold_text",
]

NOT_RUN: Final = "not run (no record in the log)"


@attrs.frozen
class ArmCoverage:
    """One arm's planned and scored episodes."""

    arm: str
    planned: int
    eligible: int

    @property
    def coverage(self) -> float | None:
        return self.eligible / self.planned if self.planned else None

    def short_of(self, threshold: float) -> bool:
        """Scored nothing, or less than ``threshold`` of what was planned."""
        return self.eligible == 0 or self.eligible < threshold * self.planned

    def figures(self) -> str:
        """``"93.3% (84/90 scored)"``."""
        cov = self.coverage
        pct = "n/a" if cov is None else f"{cov:.1%}"
        return f"{pct} ({self.eligible}/{self.planned} scored)"


@attrs.frozen
class Shortfall:
    """An arm below the threshold, with its commonest reason for an unscored episode."""

    coverage: ArmCoverage
    threshold: float
    reason: str | None
    reason_count: int

    def line(self) -> str:
        c = self.coverage
        what = (
            "scored no episode"
            if c.eligible == 0
            else f"coverage {c.figures()} is below the minimum {threshold_text(self.threshold)}"
        )
        unscored = c.planned - c.eligible
        why = (
            f"; commonest failure ({self.reason_count} of {unscored}): {self.reason}"
            if self.reason
            else ""
        )
        return f"arm {c.arm!r} {what}{why}"


def threshold_text(threshold: float) -> str:
    """``0.9`` as ``"90%"`` (never rounded: 0.925 is ``"92.5%"``)."""
    return f"{threshold * 100:g}%"


def arm_coverage(metrics: Mapping[str, Any]) -> list[ArmCoverage]:
    """Every arm's coverage from metrics.json's content, in the plan's arm order."""
    arms: Mapping[str, Any] = metrics.get("arms") or {}
    order = metrics.get("arm_order") or list(arms)
    out = []
    for arm in order:
        block = arms.get(arm) or {}
        planned, eligible = block.get("n_episodes"), block.get("n_eligible")
        out.append(
            ArmCoverage(
                str(arm),
                planned if isinstance(planned, int) else 0,
                eligible if isinstance(eligible, int) else 0,
            )
        )
    return out


def _reason(row: Mapping[str, Any]) -> str:
    reasons = row.get("verdict_reasons") or ()
    first = str(reasons[0]) if reasons else "no reason recorded"
    return f"{row.get('failure_class') or 'unscored'}: {first}"


def commonest_failures(
    results: Path, arms: Iterable[str], planned: Mapping[str, int] | None = None
) -> dict[str, tuple[str, int]]:
    """Per arm of ``arms``, its commonest reason for an unscored episode (failure class and
    first reason, as results.jsonl states them) and how many episodes gave it. Planned
    episodes with no row count as ``not run`` when ``planned`` gives the arm's total."""
    wanted = set(arms)
    counts: dict[str, Counter[str]] = {a: Counter() for a in wanted}
    rows: Counter[str] = Counter()
    try:
        with open(results, "rb") as f:
            for line in f:
                row = orjson.loads(line)
                arm = row.get("arm") if isinstance(row, dict) else None
                if arm not in wanted:
                    continue
                rows[arm] += 1
                if not row.get("eligible"):
                    counts[arm][_reason(row)] += 1
    except (OSError, orjson.JSONDecodeError):
        pass  # a reason is a courtesy: the shortfall stands without one
    out: dict[str, tuple[str, int]] = {}
    for arm in wanted:
        missing = (planned or {}).get(arm, 0) - rows[arm]
        if missing > 0:
            counts[arm][NOT_RUN] += missing
        if counts[arm]:
            # the commonest; among equals, the first in text order (stable output)
            reason, n = min(counts[arm].items(), key=lambda kv: (-kv[1], kv[0]))
            out[arm] = (reason, n)
    return out


def shortfalls(
    metrics: Mapping[str, Any], threshold: float, results: Path | None = None
) -> list[Shortfall]:
    """The arms that scored nothing or fall below ``threshold``, each with its commonest
    failure reason read from ``results`` (results.jsonl) when given."""
    short = [c for c in arm_coverage(metrics) if c.short_of(threshold)]
    if not short:
        return []
    reasons = (
        commonest_failures(results, [c.arm for c in short], {c.arm: c.planned for c in short})
        if results is not None
        else {}
    )
    return [Shortfall(c, threshold, *reasons.get(c.arm, (None, 0))) for c in short]


def recorded_threshold(sessions: Iterable[Mapping[str, Any] | None]) -> float:
    """The threshold a run recorded: the latest session's (run.started, then each
    run.resumed, in order) that states one; the default for a log that states none."""
    found = DEFAULT_MIN_COVERAGE
    for data in sessions:
        value = None if data is None else data.get("min_coverage")
        if (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and 0 <= value <= 1
        ):
            found = float(value)
    return found
