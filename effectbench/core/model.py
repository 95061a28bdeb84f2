"""Value types of the benchmark: taxonomies, the task format, what the judge and the
classifier say.

Every type here is a frozen attrs class or a string enum, so a value can be
logged, hashed and compared without surprises. Validation happens at
construction: an invalid task is rejected with a message that says what to fix.
The effect contract a task declares lives in ``effectbench.core.effects``; every name
of it is importable from here too (this is its public path, with ``effectbench.model``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import attrs
import orjson

from effectbench.core import versions
from effectbench.core.effects import (
    AnyEffect,
    Change,
    Delete,
    DiffEffect,
    DiffMode,
    Effect,
    FieldEquals,
    Insert,
    JSONScalar,
    ParamRef,
    RecordWritten,
    Row,
    Update,
    Value,
    plain_value,
    plain_values,
    sorted_mapping,
    str_tuple,
)
from effectbench.core.errors import InvalidSpec

__all__ = [
    "SPEC_VERSION",
    "AgentReport",
    "AnyEffect",
    "Category",
    "Change",
    "Classification",
    "Delete",
    "DiffEffect",
    "DiffMode",
    "Effect",
    "FailureClass",
    "FieldEquals",
    "Insert",
    "InvalidSpec",
    "JSONScalar",
    "Mismatch",
    "MismatchKind",
    "OracleSpec",
    "Outcome",
    "ParamRef",
    "RecordWritten",
    "Row",
    "Snapshot",
    "Split",
    "Substrate",
    "SwerVariant",
    "TaskSpec",
    "TrueState",
    "Update",
    "Value",
    "Verdict",
    "VerdictStatus",
    "canonical_json",
    "plain_value",
    "plain_values",
    "resolve_value",
    "trial_params",
    "trial_tag",
]

SPEC_VERSION = versions.SPEC_VERSION


class Substrate(StrEnum):
    WEB = "web"
    DESKTOP = "desktop"
    REMOTE_DISPLAY = "remote_display"


class Category(StrEnum):
    C1_PARTIAL_SAVE = "C1_partial_save"
    C2_DUPLICATE_SUBMISSION = "C2_duplicate_submission"
    C3_OPTIMISTIC_THEN_REJECT = "C3_optimistic_then_reject"
    C4_STALE_OVERWRITE = "C4_stale_overwrite"
    C5_DOUBLE_DELIVERED_INPUT = "C5_double_delivered_input"
    C6_WRONG_RECORD_HOMONYM = "C6_wrong_record_homonym"
    C7_SILENT_NOOP_WRONG_TARGET = "C7_silent_noop_wrong_target"
    CONTROL = "control"


class Split(StrEnum):
    DEV = "dev"
    TEST = "test"


class TrueState(StrEnum):
    CORRECT = "CORRECT"
    WRONG_PERSISTED = "WRONG_PERSISTED"
    ABSENT = "ABSENT"
    UNREADABLE = "UNREADABLE"


class Outcome(StrEnum):
    SUCCESS = "SUCCESS"
    SILENT_WRONG_EFFECT = "SILENT_WRONG_EFFECT"
    FALSE_ABORT = "FALSE_ABORT"
    WRONG_ACTION = "WRONG_ACTION"
    OVER_HALT = "OVER_HALT"
    SAFE_HALT = "SAFE_HALT"


class SwerVariant(StrEnum):
    WRONG_WRITE = "wrong_write"
    PHANTOM = "phantom"


class FailureClass(StrEnum):
    """Why an episode produced no agent-eligible outcome (metrics backlog P0)."""

    AGENT = "agent"
    ENVIRONMENT = "environment"
    EVALUATION = "evaluation"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"


def _check_irrelevant(instance: Any, attribute: Any, value: Mapping[str, str]) -> None:
    for entry, reason in value.items():
        table, dot, column = entry.partition(".")
        if not dot or not table or not column:
            raise InvalidSpec(
                f"oracle.irrelevant entry {entry!r} must read 'table.column' or 'table.*'"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidSpec(
                f"oracle.irrelevant entry {entry!r} needs its reason: why may the oracle ignore it?"
            )


@attrs.frozen
class OracleSpec:
    """How the independent oracle reads the record, and the four non-gameability attestations.

    ``adversarially_audited`` may only be set from audit evidence (``effectbench audit``);
    providers declare it False and the audit report supplies it.
    """

    channel: str = "snapshot"
    tables: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    isolated_from_agent: bool = True
    trial_unique_payload: bool = True
    refusal_controls: bool = False
    adversarially_audited: bool = False
    irrelevant: Mapping[str, str] = attrs.field(
        factory=dict, converter=sorted_mapping, validator=_check_irrelevant
    )
    """What the oracle may ignore, each with the reason: ``"table.column"`` (a column
    whose value does not matter, e.g. a surrogate id or a timestamp) or ``"table.*"``
    (a whole table, e.g. a session cache). The mutation audit (docs/audit.md) excuses a
    surviving mutation only there; the list travels with the task and its attestation."""


_TRIAL_SUFFIX = re.compile(r"::t\d")
"""Forbidden inside a task id: it would read as the '::t<trial>' of an episode id.
(Only a digit after '::t' clashes, so ids such as 'mockmed::timeout' stay valid.)"""

_STEP_LIST = re.compile(r"(?mi)^\s*(?:\d+[.)]|step\s+\d+\b)")


def _check_goal(instance: Any, attribute: Any, value: str) -> None:
    if not value.strip():
        raise InvalidSpec("goal is empty: state the intent in one or two sentences")
    if len(_STEP_LIST.findall(value)) >= 2:
        raise InvalidSpec(
            "goal reads as a numbered step list; state the intent instead (every arm must get "
            "the same intent, never the steps)"
        )


def _check_category(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, Category):
        raise InvalidSpec(
            f"category {value!r} is not one of {', '.join(c.value for c in Category)}: every "
            "task declares one"
        )


@attrs.frozen
class TaskSpec:
    """One agent-agnostic task: the same goal and the same oracle for every arm.

    ``params`` maps a run-param name to a template over ``{tag}``, the trial-unique
    payload derived by the harness from sha256("<task_id>:<trial>"). ``fixture`` is
    opaque provider data (e.g. which fault to inject); arms never see it.
    ``solution`` is the intended submission (with ParamRefs) for scripted arms;
    None when no action can be correct.
    """

    task_id: str
    title: str
    substrate: Substrate = attrs.field(converter=Substrate)
    category: Category = attrs.field(validator=_check_category)
    goal: str = attrs.field(validator=_check_goal)
    expected_effect: AnyEffect
    oracle: OracleSpec
    correct_action_available: bool
    params: Mapping[str, str] = attrs.field(factory=dict, converter=sorted_mapping)
    initial_state: Mapping[str, tuple[Row, ...]] = attrs.field(
        factory=dict, converter=sorted_mapping
    )
    solution: Mapping[str, Value] | None = None
    fixture: Mapping[str, JSONScalar] = attrs.field(factory=dict, converter=sorted_mapping)
    reversible: bool = False
    effect_declared: bool = True
    split: Split = attrs.field(default=Split.DEV, converter=Split)

    def __attrs_post_init__(self) -> None:
        if self.oracle.adversarially_audited and not self.oracle.trial_unique_payload:
            raise InvalidSpec(
                f"task {self.task_id}: an oracle attested as adversarially audited must use a "
                "trial-unique payload, else cross-trial contamination is undetectable"
            )
        if self.oracle.trial_unique_payload and not any("{tag}" in t for t in self.params.values()):
            raise InvalidSpec(
                f"task {self.task_id}: oracle claims a trial-unique payload but no run param "
                f"uses {{tag}}"
            )
        effect = self.expected_effect
        if isinstance(effect, DiffEffect):
            self._check_diff(effect)
        if (
            not self.task_id
            or any(c.isspace() for c in self.task_id)
            or _TRIAL_SUFFIX.search(self.task_id)
        ):
            raise InvalidSpec(
                f"task_id {self.task_id!r} must be non-empty, without spaces or '::t<digit>' "
                "(episode ids end in '::t<trial>')"
            )

    def _check_diff(self, effect: DiffEffect) -> None:
        if effect.is_reference and self.category is not Category.CONTROL:
            raise InvalidSpec(
                f"task {self.task_id}: a reference-mode diff takes its expected diff from the "
                f"reference program on a fault-free twin, so it is filed under category "
                f"control, not {self.category.value} (declare a fault task's diff instead)"
            )
        known = set(self.oracle.tables)
        if not known:
            return
        for entry in effect.allow:
            table = entry.partition(".")[0]
            if table not in known:
                raise InvalidSpec(
                    f"task {self.task_id}: allow entry {entry!r} names table {table!r}, which "
                    f"the oracle does not read ({', '.join(sorted(known))})"
                )


def trial_tag(task_id: str, trial: int) -> str:
    """The trial-unique payload tag: first 12 hex chars of sha256("<task_id>:<trial>")."""
    return hashlib.sha256(f"{task_id}:{trial}".encode()).hexdigest()[:12]


def trial_params(task: TaskSpec, trial: int) -> dict[str, str]:
    """Resolve the task's param templates for one trial; deterministic, never wall time."""
    tag = trial_tag(task.task_id, trial)
    return {name: template.replace("{tag}", tag) for name, template in task.params.items()}


def resolve_value(value: Value, params: Mapping[str, str]) -> JSONScalar:
    if isinstance(value, ParamRef):
        return params[value.name]
    return value


@attrs.frozen
class AgentReport:
    """What the arm says happened. Untrusted: it never decides success on its own."""

    reported_success: bool
    halted: bool = False
    message: str = ""


@attrs.frozen
class Snapshot:
    """Raw rows read from the system of record, per table; or why they could not be read."""

    readable: bool
    tables: Mapping[str, tuple[Row, ...]] = attrs.field(factory=dict)
    error: str | None = None

    @classmethod
    def unreadable(cls, error: str) -> Snapshot:
        return cls(readable=False, tables={}, error=error)

    def rows(self, table: str) -> tuple[Row, ...]:
        return tuple(self.tables.get(table, ()))


class VerdictStatus(StrEnum):
    CONFIRMED = "confirmed"
    REFUTED = "refuted"
    INDETERMINATE = "indeterminate"


class MismatchKind(StrEnum):
    MISSING_CHANGE = "missing change"
    WRONG_VALUE = "wrong field value"
    EXTRA_CHANGE = "extra change"
    LOST_ROW = "lost row"


@attrs.frozen
class Mismatch:
    """One way the observed diff differs from the expected one. ``evidence`` points into
    the episode's logged snapshots: ``"pre_snapshot:table[key]"``, ``"post_read:table[key]"``
    (the record's evidence map gives each event's line)."""

    kind: MismatchKind
    table: str
    row: str
    detail: str
    evidence: tuple[str, ...] = ()

    def describe(self) -> str:
        where = f" [{', '.join(self.evidence)}]" if self.evidence else ""
        return f"{self.kind.value} in {self.table!r} {self.row}: {self.detail}{where}"


@attrs.frozen
class Verdict:
    """The judge's reading of one effect against two snapshots."""

    status: VerdictStatus
    true_state: TrueState
    reasons: tuple[str, ...]
    observed_count: int | None
    expected_count: int
    mismatches: tuple[Mismatch, ...] = ()


@attrs.frozen
class Classification:
    """The classifier's answer. ``outcome`` is None exactly when not scoreable."""

    outcome: Outcome | None
    swer_variant: SwerVariant | None
    scoreable: bool
    reason: str


def canonical_json(value: Any) -> bytes:
    """Sorted-key orjson bytes: the one serialisation used for every hash in the project."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
