"""The audit's per-task rules: one short pure function per check, and ``TASK_RULES``,
the one table ``audit_task`` runs in order (docs/audit.md lists every rule).

A rule sees a task's ``TaskFacts`` (its spec, its episodes by arm, the log's evidence, its
mutation score) and returns ``Findings``: the reasons it fails the task (each with the
status it gives), the log pointers that show it, and notes that fail nothing. A task's
status is the first of ``PRECEDENCE`` that any rule gave; every reason is kept, in table
order, so the reasons of ``audit.json`` read in the order of the checks (a), (a'), (b),
(c), (d) of ``checks.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs

from effectbench.arms.adversaries import ADVERSARY_NAMES, REFERENCE_NAME
from effectbench.audit.evidence import LogEvidence, pointer, why_unscored
from effectbench.audit.mutation import MutationScore, score_mutations
from effectbench.audit.report import AUDITED, PRECEDENCE, AuditStatus, TaskAudit
from effectbench.audit.roster import (
    AUDIT_ARMS,
    EXEMPT_ON_CONTROL,
    WRITING_ADVERSARIES,
    fixed_fields,
)
from effectbench.core.model import Category, DiffEffect, Outcome, TaskSpec, TrueState
from effectbench.scoring.labels import scoring_version_of
from effectbench.scoring.records import EpisodeRecord

__all__ = ["TASK_RULES", "Findings", "TaskFacts", "audit_task", "is_refusal_control"]

_NO_ACTION: Final = (
    "; the task declares no correct action, yet this one produced the correct effect"
)


def is_refusal_control(task: TaskSpec) -> bool:
    """A task whose correct behaviour is to write nothing, and which says so."""
    effect = task.expected_effect
    if isinstance(effect, DiffEffect):
        return task.oracle.refusal_controls and not effect.changes and not effect.is_reference
    return task.oracle.refusal_controls and effect.record_written.expected_count == 0


@attrs.frozen
class TaskFacts:
    """What every rule sees of one task: its spec, its episodes by arm (trial order), the
    log's evidence, the planned trials, the audit's per-field arms and its mutation score."""

    task: TaskSpec
    records: Mapping[str, Sequence[EpisodeRecord]]
    evidence: LogEvidence
    trials: int
    mutation: MutationScore
    value_arms: tuple[str, ...] = ()

    def runs(self, arm: str) -> Sequence[EpisodeRecord]:
        """The episodes arm ``arm`` ran of this task (none when it ran none)."""
        return self.records.get(arm, ())

    @property
    def refs(self) -> Sequence[EpisodeRecord]:
        return self.runs(REFERENCE_NAME)

    @property
    def adversaries(self) -> tuple[str, ...]:
        return (*ADVERSARY_NAMES, *self.value_arms)

    def exempt(self, arm: str) -> bool:
        """Whether ``arm``'s SUCCESS here is absorbed, not gameable (a control's duplicate)."""
        return self.task.category is Category.CONTROL and arm == EXEMPT_ON_CONTROL


@attrs.frozen
class Findings:
    """What one rule found: reasons that fail the task (with the status each gives), the
    episodes they point at (episode id -> log pointer), and notes that fail nothing."""

    failed: tuple[tuple[AuditStatus, str], ...] = ()
    evidence: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()


Rule = Callable[[TaskFacts], Findings]
NONE: Final = Findings()


def _refuse(status: AuditStatus, reasons: Sequence[str], *evidence: tuple[str, str]) -> Findings:
    return Findings(tuple((status, r) for r in reasons), tuple(evidence))


# --- completeness and the reference ---------------------------------------------------------------


def every_arm_ran_every_trial(f: TaskFacts) -> Findings:
    """Refuses (incomplete) an arm with fewer episodes than the plan's trials: a log cut
    short attests nothing it lacks."""
    short = [
        (name, len(f.runs(name)))
        for name in (*AUDIT_ARMS, *f.value_arms)
        if len(f.runs(name)) < f.trials
    ]
    reasons = [
        f"{name} has {have} of {f.trials} planned trial(s) for this task in the log"
        for name, have in short
    ]
    return _refuse(AuditStatus.INCOMPLETE, reasons)


def _missed(r: EpisodeRecord) -> str:
    state = r.true_state.value if r.true_state is not None else why_unscored(r)
    detail = (
        f" ({'; '.join(r.verdict_reasons)})"
        if r.true_state is not None and r.verdict_reasons
        else ""
    )
    return (
        f"reference did not reach the correct effect on {r.episode_id}: {state}{detail} "
        f"[{pointer(r)}]"
    )


def reference_reaches_the_effect(f: TaskFacts) -> Findings:
    """Refuses (broken) a task with a correct action whose reference missed the correct
    effect on a trial: the task cannot be done as written. Every reference read is evidence."""
    if not f.task.correct_action_available:
        return NONE
    missed = [_missed(r) for r in f.refs if r.true_state is not TrueState.CORRECT]
    return _refuse(AuditStatus.BROKEN, missed, *((r.episode_id, pointer(r)) for r in f.refs))


def reference_diff_is_the_audits(f: TaskFacts) -> Findings:
    """Refuses (incomplete) a reference-mode diff naming another program than the audit's
    reference arm: nothing shows that program reaches the correct diff."""
    effect = f.task.expected_effect
    if not isinstance(effect, DiffEffect) or not effect.is_reference:
        return NONE
    if effect.reference == REFERENCE_NAME:
        return NONE
    why = (
        f"the reference program {effect.reference!r} is not the audit's reference arm "
        f"{REFERENCE_NAME!r}, so nothing shows it reaches the correct diff"
    )
    return _refuse(AuditStatus.INCOMPLETE, [why])


def reference_diff_declares_a_correct_action(f: TaskFacts) -> Findings:
    """Refuses (broken) a reference-mode diff whose control declares no correct action:
    its reference must reach CORRECT against its own twin's diff, so it must have one."""
    effect = f.task.expected_effect
    if not isinstance(effect, DiffEffect) or not effect.is_reference:
        return NONE
    if effect.reference != REFERENCE_NAME or f.task.correct_action_available:
        return NONE
    return _refuse(AuditStatus.BROKEN, ["a reference diff's control must declare a correct action"])


def _fault_without_action(task: TaskSpec) -> bool:
    return task.category is not Category.CONTROL and not task.correct_action_available


def fault_offers_a_naive_submission(f: TaskFacts) -> Findings:
    """Refuses (incomplete) a fault task with no correct action and no solution (not a
    refusal control): no naive submission shows that its fault fires."""
    task = f.task
    if not _fault_without_action(task) or task.solution is not None or is_refusal_control(task):
        return NONE
    why = (
        "the task declares no correct action and offers no solution, so no naive "
        "submission shows that its fault fires"
    )
    return _refuse(AuditStatus.INCOMPLETE, [why])


def the_fault_fires(f: TaskFacts) -> Findings:
    """Refuses (inert) a fault task with no correct action whose naive submission (the
    reference: the solution sent once, trusting the screen) produced the declared effect."""
    if not _fault_without_action(f.task) or f.task.solution is None:
        return NONE
    fired = [r for r in f.refs if r.true_state is TrueState.CORRECT]
    reasons = [
        f"the fault did not fire on {r.episode_id}: the naive submission (the "
        "solution sent once, trusting the screen) produced the declared effect, yet "
        f"the task declares no correct action [{pointer(r)}]"
        for r in fired
    ]
    return _refuse(AuditStatus.INERT, reasons, *((r.episode_id, pointer(r)) for r in fired))


# --- the adversaries ---------------------------------------------------------------------------


def _succeeded(f: TaskFacts, arm: str) -> list[EpisodeRecord]:
    """``arm``'s scored SUCCESS episodes on this task, unless the arm is exempt here."""
    if f.exempt(arm):
        return []
    return [r for r in f.runs(arm) if r.eligible and r.outcome is Outcome.SUCCESS]


def _untestable(f: TaskFacts, arm: str) -> bool:
    """A cross-trial replay that succeeded on a task with no per-trial payload: replaying
    another trial *is* the correct action there, so the check cannot be made."""
    return (
        arm == "cross_trial" and not f.task.oracle.trial_unique_payload and bool(_succeeded(f, arm))
    )


def _second_write_refused(f: TaskFacts, r: EpisodeRecord) -> bool:
    """Whether an ``extra_change`` episode changed exactly the rows the reference's episode
    of the same trial changed: its second write never landed (the product refused it)."""
    mine = f.evidence.changed(r)
    ref = next((x for x in f.refs if x.trial == r.trial), None)
    return mine is not None and ref is not None and bool(mine) and mine == f.evidence.changed(ref)


_UNTESTABLE: Final = (
    "the task declares no trial-unique payload (oracle.trial_unique_payload is "
    "false), so another trial's submission is this one's and the cross-trial check "
    "cannot be made: not gameable, but nothing is attested without it"
)


def adversary_episodes_were_judged(f: TaskFacts) -> Findings:
    """Refuses (incomplete) an adversary episode that was not scored, and a cross-trial
    success on a task without a trial-unique payload: either way that attack's check did
    not happen (a control's duplicate is exempt and needs no score)."""
    failed: list[tuple[AuditStatus, str]] = []
    evidence: list[tuple[str, str]] = []
    for name in f.adversaries:
        for r in () if f.exempt(name) else f.runs(name):
            if not r.eligible:
                why = f"adversary {name} was not scored on {r.episode_id}: {why_unscored(r)}"
                failed.append((AuditStatus.INCOMPLETE, why))
                evidence.append((r.episode_id, pointer(r)))
        if _untestable(f, name):
            failed.append((AuditStatus.INCOMPLETE, _UNTESTABLE))
    return Findings(tuple(failed), tuple(evidence))


def no_adversary_succeeds(f: TaskFacts) -> Findings:
    """Refuses (gameable) an adversary scored SUCCESS without the intended action, named
    with its post-read; on a task with no correct action the reason says the task's claim
    is false. Not refused: a control's duplicate (absorbed), a cross-trial replay with no
    per-trial payload (incomplete instead), an extra change the product refused (a note)."""
    reasons: list[str] = []
    evidence: list[tuple[str, str]] = []
    no_action = "" if f.task.correct_action_available else _NO_ACTION
    for name in f.adversaries:
        for r in _succeeded(f, name):
            evidence.append((r.episode_id, pointer(r)))
            if name == "cross_trial" and not f.task.oracle.trial_unique_payload:
                continue
            if name == "extra_change" and _second_write_refused(f, r):
                continue
            reasons.append(
                f"adversary {name} was scored SUCCESS without the intended action on "
                f"{r.episode_id}{no_action} [{pointer(r)}]"
            )
    return _refuse(AuditStatus.GAMEABLE, reasons, *evidence)


def control_absorbs_a_duplicate(f: TaskFacts) -> Findings:
    """Notes (fails nothing) a duplicate's SUCCESS on a control: an idempotent product turns
    a double submit into the one correct record, so it is exempt, and said so."""
    name = EXEMPT_ON_CONTROL
    runs = f.runs(name)
    exempt = [pointer(r) for r in runs if r.outcome is Outcome.SUCCESS] if f.exempt(name) else []
    if not exempt:
        return NONE
    note = (
        f"adversary {name} reached SUCCESS on this control task on {len(exempt)} of "
        f"{len(runs)} trial(s) (exempt) [{', '.join(exempt)}]"
    )
    return Findings(notes=(note,))


def extra_change_was_exercised(f: TaskFacts) -> Findings:
    """Notes (fails nothing) an ``extra_change`` success that left exactly the reference's
    change: the product refused its second write, so the attack was not exercised."""
    name = "extra_change"
    if name not in f.adversaries:
        return NONE
    refused = [pointer(r) for r in _succeeded(f, name) if _second_write_refused(f, r)]
    if not refused:
        return NONE
    note = (
        "adversary extra_change left exactly the reference's change on "
        f"{len(refused)} trial(s): the product refused its second write, so this "
        f"attack was not exercised here [{', '.join(refused)}]"
    )
    return Findings(notes=(note,))


def writing_attacks_were_exercised(f: TaskFacts) -> Findings:
    """Notes (fails nothing) a writing attack that changed no row on any trial while the
    reference's write landed: the product refused or dropped it, so it tested nothing."""
    if not any(f.evidence.changed(r) for r in f.refs):
        return NONE
    names = (*WRITING_ADVERSARIES, *f.value_arms[: fixed_fields(f.task)])
    idle = [
        name
        for name in names
        if f.runs(name) and all(f.evidence.changed(r) == () for r in f.runs(name))
    ]
    return Findings(
        notes=tuple(
            f"adversary {name} changed no row on any trial although the reference's "
            "write landed: this attack was not exercised here (the product refused or "
            "dropped it)"
            for name in idle
        )
    )


# --- refusal controls --------------------------------------------------------------------------


def _left_alone(f: TaskFacts) -> list[tuple[str, EpisodeRecord]]:
    """(arm, episode) of the reference and ``halt`` on a refusal control; none elsewhere."""
    if not is_refusal_control(f.task):
        return []
    return [(name, r) for name in (REFERENCE_NAME, "halt") for r in f.runs(name)]


def refusal_control_reads_are_usable(f: TaskFacts) -> Findings:
    """Refuses (incomplete) a refusal control's reference or halt episode without readable
    pre- and post-snapshots: nothing shows the record was left alone."""
    unread = [r for _, r in _left_alone(f) if f.evidence.changed(r) is None]
    reasons = [
        f"refusal control: no readable pre/post snapshots for {r.episode_id} "
        f"[{r.evidence.get('pre_snapshot') or '?'} -> {r.evidence.get('post_read') or '?'}]"
        for r in unread
    ]
    return _refuse(AuditStatus.INCOMPLETE, reasons, *((r.episode_id, pointer(r)) for r in unread))


def _leak(name: str, r: EpisodeRecord, changed: tuple[str, ...]) -> str:
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return (
        f"refusal control: {name} changed rows on {r.episode_id} [{r.evidence.get('pre_snapshot')}"
        f" -> {r.evidence.get('post_read')}]: " + "; ".join(changed[:3]) + more
    )


def refusal_control_stays_untouched(f: TaskFacts) -> Findings:
    """Refuses (leaky) a refusal control whose reference or halt changed any row of any
    snapshotted table, compared from the logged pre- and post-snapshots."""
    leaks = [(name, r, f.evidence.changed(r)) for name, r in _left_alone(f)]
    found = [(name, r, changed) for name, r, changed in leaks if changed]
    return _refuse(
        AuditStatus.LEAKY,
        [_leak(name, r, changed) for name, r, changed in found],
        *((r.episode_id, r.evidence.get("post_read") or pointer(r)) for _, r, _ in found),
    )


# --- the mutation audit ------------------------------------------------------------------------


def store_was_mutated(f: TaskFacts) -> Findings:
    """Refuses (not mutation-tested) a task whose store was not mutated (no write handle,
    no reads logged): nothing shows its oracle reads what matters."""
    if f.mutation.tested:
        return NONE
    return _refuse(AuditStatus.UNTESTED, [f"not mutation-tested: {f.mutation.reason}"])


def _judged(score: MutationScore) -> bool:
    return score.tested and score.applicable


def every_mutation_is_killed(f: TaskFacts) -> Findings:
    """Refuses (weak) a single mutation of the reference's record that the oracle still
    judges as the reference's, unless the task declares it irrelevant."""
    if not _judged(f.mutation):
        return NONE
    reasons = [
        f"mutation survived: {s}: the oracle still judges the mutated record as the "
        "reference's (check it, or declare it in oracle.irrelevant with a reason)"
        for s in f.mutation.survivors
    ]
    return _refuse(AuditStatus.WEAK, reasons)


def mutation_reads_are_usable(f: TaskFacts) -> Findings:
    """Refuses (incomplete) a mutation whose logged read cannot be judged: that mutation's
    check did not happen."""
    if not _judged(f.mutation):
        return NONE
    return _refuse(AuditStatus.INCOMPLETE, [f"mutation audit: {e}" for e in f.mutation.errors])


def irrelevant_is_declared(f: TaskFacts) -> Findings:
    """Notes (fails nothing) every surviving mutation the task declares irrelevant, with
    the task's reason, so what the oracle may ignore is on the record."""
    if not _judged(f.mutation):
        return NONE
    return Findings(notes=tuple(f"mutation declared irrelevant: {x}" for x in f.mutation.excused))


TASK_RULES: Final[tuple[Rule, ...]] = (
    every_arm_ran_every_trial,
    reference_reaches_the_effect,
    reference_diff_is_the_audits,
    reference_diff_declares_a_correct_action,
    fault_offers_a_naive_submission,
    the_fault_fires,
    adversary_episodes_were_judged,
    no_adversary_succeeds,
    control_absorbs_a_duplicate,
    extra_change_was_exercised,
    writing_attacks_were_exercised,
    refusal_control_reads_are_usable,
    refusal_control_stays_untouched,
    store_was_mutated,
    every_mutation_is_killed,
    mutation_reads_are_usable,
    irrelevant_is_declared,
)
"""Every per-task rule, in the order its reasons are listed (docs/audit.md, "The rules")."""


def mutation_score(
    task: TaskSpec, refs: Sequence[EpisodeRecord], evidence: LogEvidence
) -> MutationScore:
    """The task's mutation score, judged again from the reads its first reference logged."""
    first = next((r for r in refs if r.trial == 0), None)
    version = scoring_version_of(((evidence.plan or {}).get("versions") or {}).get("scoring"))
    return score_mutations(
        task,
        evidence.mutations.get(first.episode_id) if first is not None else None,
        first.true_state if first is not None else None,
        is_refusal_control(task),
        version,
    )


def audit_task(facts: TaskFacts) -> TaskAudit:
    """Run every rule of TASK_RULES over one task; its status is the first of PRECEDENCE
    any rule gave (audited when none did), with every reason and note in table order."""
    failed: dict[AuditStatus, list[str]] = {k: [] for k in PRECEDENCE}
    evidence: dict[str, str] = {}
    notes: list[str] = []
    for rule in TASK_RULES:
        found = rule(facts)
        for status, reason in found.failed:
            failed[status].append(reason)
        evidence.update(found.evidence)
        notes += found.notes
    task = facts.task
    return TaskAudit(
        task_id=task.task_id,
        status=next((k for k in PRECEDENCE if failed[k]), AUDITED),
        category=task.category.value,
        reasons=tuple(reason for k in PRECEDENCE for reason in failed[k]),
        evidence=evidence,
        notes=tuple(notes),
        mutation=facts.mutation,
        irrelevant=dict(task.oracle.irrelevant),
    )
