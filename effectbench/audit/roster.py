"""The audit's roster: which arms an audit of a pack runs, in which order, and what the
checks know about each adversary (which ones write, which do nothing, which one a
control may absorb). The runner builds the arms from it; the checks and the report read
the names, so the three agree on what a complete audit is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from effectbench.arms.adversaries import (
    ADVERSARY_NAMES,
    DIFF_ADVERSARY_NAMES,
    REFERENCE_NAME,
    CrossTrialArm,
    DuplicateArm,
    ExtraChangeArm,
    HaltArm,
    NullArm,
    PartialDiffArm,
    PhantomArm,
    WrongFieldArm,
    WrongTargetArm,
    WrongValueArm,
    wrong_value_names,
)
from effectbench.arms.reference import ReferenceArm
from effectbench.core.arm import Arm
from effectbench.core.model import DiffEffect, ParamRef, TaskSpec
from effectbench.run.defaults import DEFAULTS

__all__ = [
    "AUDIT_ARMS",
    "DEFAULT_TRIALS",
    "DIFF_ADVERSARY_NAMES",
    "DO_NOTHING_ADVERSARIES",
    "EXEMPT_ON_CONTROL",
    "WRITING_ADVERSARIES",
    "audit_arms",
    "fixed_fields",
    "value_arm_names",
]

AUDIT_ARMS: Final = (REFERENCE_NAME, *ADVERSARY_NAMES)
WRITING_ADVERSARIES: Final = ("duplicate", "wrong_field", "wrong_target", "cross_trial")
DO_NOTHING_ADVERSARIES: Final = ("null", "phantom")
"""They never write, so a SUCCESS of theirs means the oracle passes an untouched record:
gameable on every task, controls included (no task may be passable by a do-nothing program)."""
EXEMPT_ON_CONTROL: Final = "duplicate"
"""The one attack a correct control may absorb: an idempotent product turns a double
submit into the one correct record. Every other SUCCESS is a failure, controls included."""
DEFAULT_TRIALS: Final = DEFAULTS.audit_trials


def fixed_fields(task: TaskSpec) -> int:
    """How many solution fields are fixed (not taken from a run param): each gets its own
    ``wrong_value_<i>`` attack, so an oracle that never checks one (an amount) is caught."""
    return sum(not isinstance(v, ParamRef) for v in (task.solution or {}).values())


def value_arm_names(tasks: Sequence[TaskSpec]) -> tuple[str, ...]:
    """The per-field arms an audit of ``tasks`` runs (enough for the widest solution),
    then the diff adversaries when any task's effect is a state diff."""
    names = wrong_value_names(max((fixed_fields(t) for t in tasks), default=0))
    if any(isinstance(t.expected_effect, DiffEffect) for t in tasks):
        names += DIFF_ADVERSARY_NAMES
    return names


def audit_arms(fields: int = 0, diffs: bool = False) -> list[Arm]:
    """Fresh instances of the reference arm and every adversary, in AUDIT_ARMS order,
    then one ``wrong_value_<i>`` arm per fixed field (``fields`` of them), then (``diffs``)
    the diff adversaries."""
    arms: list[Arm] = [
        ReferenceArm(mutation_audit=True),
        NullArm(),
        HaltArm(),
        PhantomArm(),
        DuplicateArm(),
        WrongFieldArm(),
        WrongTargetArm(),
        CrossTrialArm(),
        *(WrongValueArm(i) for i in range(1, fields + 1)),
    ]
    if diffs:
        arms += [ExtraChangeArm(), PartialDiffArm()]
    extra = DIFF_ADVERSARY_NAMES if diffs else ()
    assert tuple(a.name for a in arms) == AUDIT_ARMS + wrong_value_names(fields) + extra
    return arms
