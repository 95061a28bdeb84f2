"""The verifier's diff engine: claimed against recomputed values, one reason per difference.

Shared by the run check and the submission check so both compare in one way: counts,
labels and strings exactly, floats within FLOAT_TOLERANCE, at most a few reasons per file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from effectbench.core.exitcodes import ExitCode
from effectbench.core.model import TaskSpec

__all__ = ["FLOAT_TOLERANCE", "LABEL_FIELDS", "Reasons", "VerifyReport", "compare", "load_json"]

FLOAT_TOLERANCE: Final = 1e-9
_MAX_PER_SOURCE: Final = 25
"""At most this many differences are listed per compared file; the rest are counted."""
LABEL_FIELDS: Final = ("true_state", "outcome", "swer_variant", "eligible", "failure_class")
"""The labels a row carries that the verifier re-derives from the row's raw fields."""


@attrs.frozen
class VerifyReport:
    """ok (sound) exactly when reasons is empty; every reason is one line naming where and
    what. A sound run is a *result* only when it is also complete (no ``incomplete``
    line), and *contained* only when no arm is ``uncontained``; ``status`` is the exit
    status the CLI gives it (docs/exit-codes.md)."""

    ok: bool
    reasons: list[str]
    notes: list[str] = attrs.field(factory=list)
    """What a sound run cannot claim (e.g. a comparison on fewer than 3 trials per
    task); shown beside the verdict, never a reason for unsound."""
    coverage: list[str] = attrs.field(factory=list)
    """One line per arm: its re-derived coverage (``"arm 93.3% (84/90 scored)"``)."""
    incomplete: list[str] = attrs.field(factory=list)
    """One line per arm that scored nothing or falls below the recorded threshold, with its
    commonest failure reason: such a run measured too little to be a result."""
    uncontained: list[str] = attrs.field(factory=list)
    """Arms that ran without containment (a protocol agent as a plain subprocess, an
    in-process arm the harness does not ship)."""
    min_coverage: float | None = None
    """The threshold the run (or submission) recorded, as applied."""

    @classmethod
    def of(cls, reasons: Sequence[str], notes: Sequence[str] = ()) -> VerifyReport:
        return cls(not reasons, list(reasons), list(notes))

    @property
    def complete(self) -> bool:
        return not self.incomplete

    @property
    def status(self) -> ExitCode:
        """FAILED when not sound, else INCOMPLETE when an arm measured too little, else
        NOT_CONTAINED when an arm ran uncontained, else OK."""
        if not self.ok:
            return ExitCode.FAILED
        if self.incomplete:
            return ExitCode.INCOMPLETE
        if self.uncontained:
            return ExitCode.NOT_CONTAINED
        return ExitCode.OK


class Reasons:
    """Collects reasons, capping each source so a wholesale edit stays readable."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._per: dict[str, int] = {}

    def add(self, source: str, text: str) -> None:
        n = self._per.get(source, 0) + 1
        self._per[source] = n
        if n <= _MAX_PER_SOURCE:
            self.items.append(f"{source}: {text}")

    def remove(self, source: str, text: str) -> bool:
        """Take back a reason another one explains (an artifact an interrupted run never built)."""
        line = f"{source}: {text}"
        if line not in self.items:
            return False
        self.items.remove(line)
        self._per[source] -= 1
        return True

    def close(self) -> list[str]:
        out = list(self.items)
        for source, n in self._per.items():
            if n > _MAX_PER_SOURCE:
                out.append(f"{source}: ... and {n - _MAX_PER_SOURCE} more differences")
        return out


def _same_scalar(claimed: Any, actual: Any) -> bool:
    if isinstance(claimed, bool) or isinstance(actual, bool) or claimed is None or actual is None:
        return type(claimed) is type(actual) and claimed == actual
    if isinstance(claimed, int) and isinstance(actual, int):
        return claimed == actual
    if isinstance(claimed, (int, float)) and isinstance(actual, (int, float)):
        if math.isnan(claimed) or math.isnan(actual):
            return math.isnan(claimed) and math.isnan(actual)
        return abs(claimed - actual) <= FLOAT_TOLERANCE
    return type(claimed) is type(actual) and claimed == actual


def compare(claimed: Any, actual: Any, path: str, source: str, reasons: Reasons) -> None:
    """Exact for counts, labels and strings; floats within FLOAT_TOLERANCE."""
    if isinstance(claimed, dict) and isinstance(actual, dict):
        for key in sorted(set(claimed) | set(actual), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in claimed:
                reasons.add(source, f"{sub} is missing (recomputed {show(actual[key])})")
            elif key not in actual:
                reasons.add(
                    source,
                    f"{sub} is not something the verifier computes (claimed {show(claimed[key])})",
                )
            else:
                compare(claimed[key], actual[key], sub, source, reasons)
    elif isinstance(claimed, list) and isinstance(actual, list):
        if len(claimed) != len(actual):
            reasons.add(source, f"{path} has {len(claimed)} entries, recomputed {len(actual)}")
        for i, (c, a) in enumerate(zip(claimed, actual, strict=False)):
            compare(c, a, f"{path}[{i}]", source, reasons)
    elif not _same_scalar(claimed, actual):
        reasons.add(
            source, f"{path or '(document)'} claimed {show(claimed)}, recomputed {show(actual)}"
        )


def show(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."


def load_json(path: Path, reasons: Reasons) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        reasons.add(path.name, "missing")
    except orjson.JSONDecodeError as exc:
        reasons.add(path.name, f"not valid JSON ({exc})")
    except OSError as exc:
        reasons.add(path.name, f"cannot be read ({exc.strerror or exc})")
    return None


def first_difference(a: str, b: str) -> int:
    """The 1-based number of the first line where two texts differ."""
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb, strict=False), 1):
        if x != y:
            return i
    return min(len(la), len(lb)) + 1


def task_axis(task: TaskSpec, field: str) -> Any:
    """A task axis as rows and logged events carry it (enums by value)."""
    want = getattr(task, field)
    return want.value if hasattr(want, "value") else want
