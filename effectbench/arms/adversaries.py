"""The reference arm and the adversaries an oracle must defeat.

``effectbench audit`` runs these over every task. The reference (``oracle``) shows the
task can be done; each adversary tries to be scored SUCCESS without the true effect.
They are generic: they see only the TaskView (params, the resolved ``solution``, the
declared effect) and the EnvHandle (the product driver and channels), never the
category, the fixture or the oracle. Every arm records what it attempted as a
telemetry action, so the audit log shows the attack next to the oracle's reading.

How each adversary builds its payload (the documented mutation rules):

- ``wrong_field``: the field to corrupt is the first solution field, in solution
  order, that holds a string taken from a run param, preferring fields the declared
  effect checks with ``field_equals`` and avoiding the effect's idempotency-key
  column; its value gets `` (amended)`` appended (so it still carries the trial tag).
- ``wrong_target``: a provider may name confusable records (``Alternatives.records``,
  the ``confusable`` channel, ``{field: value}``, e.g. ``{"patient_id": "p2"}``); the
  first solution field it names is redirected there. Else
  the first solution field that is not param-derived, preferring the effect's
  selector columns, gets the first offered valid value that differs
  (``Alternatives.values``), or is mutated: a string gets ``-x`` appended, an integer +1.
- ``cross_trial``: the episode id is ``<arm>::<task_id>::t<trial>``; the arm computes
  this trial's tag and trial ``trial + 1``'s tag with ``trial_tag`` and replaces the
  former with the latter in every string of the solution, i.e. it submits the
  payload the next trial would submit.
- ``wrong_value_<i>`` (one arm per fixed field, ``i`` from 1): the fixed fields are the
  solution fields that are not param-derived, in sorted name order; arm ``i`` perturbs
  the ``i``-th one alone: to the field's confusable record, else to the first valid
  value the provider offers for it that differs (``Alternatives.values``, the
  ``alternatives`` channel: a product that validates enums refuses a made-up one);
  else a boolean is flipped, an integer gets +1, a float is scaled by 100, a string
  gets ``-x`` appended. A task with fewer fixed fields gives
  the arm nothing to do: it writes nothing and claims success.

Two more attack diff tasks (SPEC 5.3), so the audit runs them where a task's effect is a
state diff (``DIFF_ADVERSARY_NAMES``):

- ``extra_change``: submits the solution, then the ``wrong_target`` payload too (the
  right change plus one on a confusable record); with no target to redirect it writes
  nothing and claims success.
- ``partial_diff``: submits the solution with its last field (solution order) emptied,
  a submission that carries only part of the change (a visit without its amount).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

from effectbench.arms.reference import REFERENCE_NAME, Solution, cannot_act, submit
from effectbench.arms.reference import ReferenceArm as OracleArm
from effectbench.core.arm import TaskView
from effectbench.core.model import (
    AgentReport,
    AnyEffect,
    Delete,
    DiffEffect,
    Insert,
    JSONScalar,
    trial_tag,
)
from effectbench.core.provider import Alternatives, EnvHandle

__all__ = [
    "ADVERSARY_NAMES",
    "DIFF_ADVERSARY_NAMES",
    "REFERENCE_NAME",
    "CrossTrialArm",
    "DuplicateArm",
    "ExtraChangeArm",
    "HaltArm",
    "NullArm",
    "OracleArm",
    "PartialDiffArm",
    "PhantomArm",
    "WrongFieldArm",
    "WrongTargetArm",
    "WrongValueArm",
    "cross_trial_solution",
    "parse_episode_id",
    "partial_solution",
    "wrong_field_solution",
    "wrong_target_solution",
    "wrong_value_names",
    "wrong_value_solution",
]

DIFF_ADVERSARY_NAMES: Final = ("extra_change", "partial_diff")
ADVERSARY_NAMES: Final = (
    "null",
    "halt",
    "phantom",
    "duplicate",
    "wrong_field",
    "wrong_target",
    "cross_trial",
)
AMEND_SUFFIX: Final = " (amended)"
TARGET_SUFFIX: Final = "-x"


# --- pure payload builders ------------------------------------------------------------------


def parse_episode_id(episode_id: str) -> tuple[str, str, int]:
    """Split ``<arm>::<task_id>::t<trial>`` (task ids may themselves contain ``::``)."""
    head, sep, trial = episode_id.rpartition("::t")
    arm, sep2, task_id = head.partition("::")
    if not sep or not sep2 or not task_id or not trial.isdigit():
        raise ValueError(f"episode id {episode_id!r} is not '<arm>::<task_id>::t<trial>'")
    return arm, task_id, int(trial)


def _param_derived(value: JSONScalar, params: Mapping[str, str]) -> bool:
    return isinstance(value, str) and any(value == p for p in params.values() if p)


def _checked(effect: AnyEffect | None) -> set[str]:
    """The fields the effect checks: field_equals, or the values a diff's changes name."""
    if effect is None:
        return set()
    if isinstance(effect, DiffEffect):
        return {
            f
            for c in effect.changes
            if not isinstance(c, Delete)
            for f in (c.fields if isinstance(c, Insert) else c.after)
        }
    return {fe.field for fe in effect.field_equals}


def _selector(effect: AnyEffect | None) -> set[str]:
    """The columns that pick the record: the selector, or a diff's key columns."""
    if effect is None:
        return set()
    if isinstance(effect, DiffEffect):
        return {c for cols in effect.keys.values() for c in cols}
    return set(effect.record_written.selector)


def wrong_field_solution(task: TaskView, solution: Solution) -> tuple[Solution, str] | None:
    """The solution with one param-derived string field amended, and that field's name."""
    checked = _checked(task.effect)
    effect = task.effect
    key = (
        effect.record_written.idempotency_key
        if effect is not None and not isinstance(effect, DiffEffect)
        else None
    )
    key_col = key[0] if key is not None else None
    candidates = [k for k, v in solution.items() if _param_derived(v, task.params)]
    ranked = (
        [k for k in candidates if k in checked]
        + [k for k in candidates if k not in checked and k != key_col]
        + [k for k in candidates if k == key_col and k not in checked]
    )
    if not ranked:
        return None
    field = ranked[0]
    return {**solution, field: f"{solution[field]}{AMEND_SUFFIX}"}, field


def wrong_target_solution(
    task: TaskView, solution: Solution, channels: Mapping[str, str]
) -> tuple[Solution, str] | None:
    """The solution aimed at a confusable record, and the field that was redirected."""
    offered = Alternatives.from_channels(channels)
    for field in solution:
        record = offered.record(field, solution[field])
        if record is not None:
            return {**solution, field: record}, field
    selector = _selector(task.effect)
    plain = [
        k
        for k, v in solution.items()
        if not _param_derived(v, task.params)
        and isinstance(v, (str, int))
        and not isinstance(v, bool)
    ]
    ranked = [k for k in plain if k in selector] + [k for k in plain if k not in selector]
    if not ranked:
        return None
    field = ranked[0]
    value = solution[field]
    offered_value = offered.value(field, value)
    mutated: JSONScalar = (
        offered_value
        if offered_value is not None
        else f"{value}{TARGET_SUFFIX}"
        if isinstance(value, str)
        else int(value or 0) + 1
    )
    return {**solution, field: mutated}, field


def cross_trial_solution(task: TaskView, solution: Solution) -> tuple[Solution, int] | None:
    """The payload trial ``trial + 1`` would submit, and that trial; None when no value
    carries this trial's tag (then there is nothing trial-specific to replay)."""
    _, task_id, _ = parse_episode_id(task.episode_id)
    mine = trial_tag(task_id, task.trial)
    other_trial = task.trial + 1
    theirs = trial_tag(task_id, other_trial)
    replayed = {
        k: v.replace(mine, theirs) if isinstance(v, str) else v for k, v in solution.items()
    }
    if replayed == dict(solution):
        return None
    return replayed, other_trial


def partial_solution(solution: Solution) -> tuple[Solution, str] | None:
    """The solution with its last field emptied, and that field; None for an empty one."""
    if not solution:
        return None
    field = list(solution)[-1]
    return {**solution, field: ""}, field


WRONG_VALUE_PREFIX: Final = "wrong_value_"
SCALE: Final = 100


def wrong_value_names(fields: int) -> tuple[str, ...]:
    """The per-field arms for a pack whose solutions hold at most ``fields`` fixed fields."""
    return tuple(f"{WRONG_VALUE_PREFIX}{i}" for i in range(1, fields + 1))


def _perturbed(value: JSONScalar) -> JSONScalar:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * SCALE if value else 1.0
    return f"{value}{TARGET_SUFFIX}"


def wrong_value_solution(
    task: TaskView, solution: Solution, channels: Mapping[str, str], index: int
) -> tuple[Solution, str] | None:
    """The solution with its ``index``-th fixed field (1-based, sorted names) perturbed
    alone, and that field; None when there is no such field or it holds null."""
    fixed = sorted(k for k, v in solution.items() if not _param_derived(v, task.params))
    if not 1 <= index <= len(fixed) or solution[fixed[index - 1]] is None:
        return None
    field = fixed[index - 1]
    other = Alternatives.from_channels(channels).value(field, solution[field])
    if other is not None:
        return {**solution, field: other}, field
    return {**solution, field: _perturbed(solution[field])}, field


# --- arms -------------------------------------------------------------------------------------


class _Adversary:
    """Shared shape: an adversary always reports success unless it is ``halt``."""

    name: str
    records_actions = True
    """Each attack records what it did (docs/metrics.md: actions)."""
    CLAIM: ClassVar[str] = "Done: the change is saved."
    """Product-neutral words: the same adversary attacks every provider's tasks."""

    def _claim(self) -> AgentReport:
        return AgentReport(reported_success=True, halted=False, message=self.CLAIM)


class NullArm(_Adversary):
    """Does nothing at all and reports success: a do-nothing program must never pass."""

    name: str = "null"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        env.telemetry.action("adversary", attack="null", wrote=False)
        return self._claim()


class HaltArm(_Adversary):
    """Does nothing and reports failure: the baseline for refusal controls."""

    name: str = "halt"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        env.telemetry.action("adversary", attack="halt", wrote=False)
        return AgentReport(reported_success=False, halted=True, message="Halting without acting.")


class PhantomArm(_Adversary):
    """Paints success without writing: it may read the product (its own readback) but
    never submits, then reports a confident, verified-sounding success."""

    name: str = "phantom"
    CLAIM = "Saved and verified: the product's readback shows the change."

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        verifier = env.product_effect_verifier()
        if verifier is not None:
            snap = await verifier.read()
            env.telemetry.action("read_product", readable=snap.readable)
        env.telemetry.action("adversary", attack="phantom", wrote=False)
        return self._claim()


class DuplicateArm(_Adversary):
    """Submits the intended solution twice and reports success."""

    name: str = "duplicate"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        why = cannot_act(task, env)
        if why is not None or task.solution is None:
            env.telemetry.action("adversary", attack="duplicate", wrote=False, reason=why)
            return self._claim()
        env.telemetry.action("adversary", attack="duplicate", wrote=True, submissions=2)
        for attempt in (1, 2):
            await submit(env, task.solution, attempt)
        return self._claim()


class _FieldMutationArm(_Adversary):
    """Submits the solution once with one field mutated by ``mutate``; reports success."""

    NO_FIELD: ClassVar[str] = "no field to mutate"

    def mutate(
        self, task: TaskView, solution: Solution, env: EnvHandle
    ) -> tuple[Solution, str] | None:
        raise NotImplementedError

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        why = cannot_act(task, env)
        built = (
            None
            if why is not None or task.solution is None
            else self.mutate(task, task.solution, env)
        )
        if built is None:
            env.telemetry.action(
                "adversary", attack=self.name, wrote=False, reason=why or self.NO_FIELD
            )
            return self._claim()
        values, field = built
        env.telemetry.action(
            "adversary", attack=self.name, wrote=True, field=field, value=values[field]
        )
        await submit(env, values, 1)
        return self._claim()


class WrongFieldArm(_FieldMutationArm):
    """Submits the solution with one param-derived field (e.g. the note) amended."""

    name: str = "wrong_field"
    NO_FIELD = "no param field"

    def mutate(
        self, task: TaskView, solution: Solution, env: EnvHandle
    ) -> tuple[Solution, str] | None:
        return wrong_field_solution(task, solution)


class WrongTargetArm(_FieldMutationArm):
    """Submits the solution to a confusable record (see the module doc for the rule)."""

    name: str = "wrong_target"
    NO_FIELD = "no target field"

    def mutate(
        self, task: TaskView, solution: Solution, env: EnvHandle
    ) -> tuple[Solution, str] | None:
        return wrong_target_solution(task, solution, env.channels)


class WrongValueArm(_FieldMutationArm):
    """Submits the solution with its ``index``-th fixed field perturbed: an oracle that
    never checks that field (e.g. an amount) lets the wrong value pass."""

    NO_FIELD = "no fixed field at this index"

    def __init__(self, index: int) -> None:
        self.index = index
        self.name = f"{WRONG_VALUE_PREFIX}{index}"

    def mutate(
        self, task: TaskView, solution: Solution, env: EnvHandle
    ) -> tuple[Solution, str] | None:
        return wrong_value_solution(task, solution, env.channels, self.index)


class PartialDiffArm(_FieldMutationArm):
    """Submits the solution with its last field emptied: a change that lands in part."""

    name: str = "partial_diff"

    def mutate(
        self, task: TaskView, solution: Solution, env: EnvHandle
    ) -> tuple[Solution, str] | None:
        return partial_solution(solution)


class ExtraChangeArm(_Adversary):
    """Makes the right change and one more, on a confusable record: an oracle that checks
    only the change it expects, not that nothing else changed, passes it."""

    name: str = "extra_change"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        why = cannot_act(task, env)
        extra = (
            None
            if why is not None or task.solution is None
            else wrong_target_solution(task, task.solution, env.channels)
        )
        if extra is None or task.solution is None:
            env.telemetry.action(
                "adversary", attack=self.name, wrote=False, reason=why or "no target field"
            )
            return self._claim()
        values, field = extra
        env.telemetry.action(
            "adversary", attack=self.name, wrote=True, field=field, value=values[field]
        )
        await submit(env, task.solution, 1)
        await submit(env, values, 2)
        return self._claim()


class CrossTrialArm(_Adversary):
    """Replays the payload of another trial of the same task (trial + 1)."""

    name: str = "cross_trial"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        why = cannot_act(task, env)
        built = (
            None
            if why is not None or task.solution is None
            else cross_trial_solution(task, task.solution)
        )
        if built is None or task.solution is None:
            # No trial tag in the payload: replaying another trial IS this trial's payload.
            if why is None and task.solution is not None:
                env.telemetry.action(
                    "adversary", attack="cross_trial", wrote=True, replayed_trial=None
                )
                await submit(env, task.solution, 1)
            else:
                env.telemetry.action("adversary", attack="cross_trial", wrote=False, reason=why)
            return self._claim()
        values, other = built
        env.telemetry.action("adversary", attack="cross_trial", wrote=True, replayed_trial=other)
        await submit(env, values, 1)
        return self._claim()
