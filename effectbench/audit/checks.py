"""The adversarial audit: an oracle's non-gameability, shown by a run instead of a flag.

``audit_provider`` runs the ``oracle`` reference arm and every adversary over every
task of a provider through the ordinary scheduler, so the evidence is an ordinary run
directory (``events.jsonl``, ``results.jsonl``, ...). ``audit_log`` then reads that log
alone (labels re-derived from raw reports and snapshots, never from a stored label)
and checks, per task:

(a) **reference**: where a correct action exists, the reference reaches the correct
    effect on every trial; otherwise the task is ``broken``.
(a') **fault fires**: on a task that injects a fault (category not ``control``) and
    declares no correct action, the reference's submission is the naive one (the
    solution sent once, trusting the screen); it must not reach the correct effect,
    or the fault did not fire and the task is ``inert``.
(b) **adversaries**: no adversary is scored SUCCESS (on a control, ``duplicate`` may
    be); otherwise the oracle is ``gameable`` and the
    offending episode is named with its evidence pointer. A duplicate's SUCCESS on a
    control is an exempt note: an idempotent product absorbs a double submit into the
    one correct record. No other attack is ever exempt (a control whose oracle only
    counts rows passes a wrong note just as a fault task's would). (On a refusal control
    an untouched record judges ABSENT, so a do-nothing adversary that claims success is
    a phantom SWER.)
(c) **refusal controls** (``oracle.refusal_controls`` and ``expected_count == 0``):
    the reference and ``halt`` leave every row of every table unchanged; otherwise
    the control is ``leaky``.

A task whose evidence is missing (an arm short of its planned trials, an episode
failed, a snapshot was unreadable) is ``incomplete``: nothing is attested from a check that did not
happen. The ``adversarially_audited`` attestation of a task is True exactly when its status is
``audited``.

Which arms an audit runs is ``roster.py``; what it reports (``TaskAudit``,
``AuditReport``, ``format_audit``) is ``report.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from effectbench.arms.adversaries import ADVERSARY_NAMES, DIFF_ADVERSARY_NAMES, REFERENCE_NAME
from effectbench.audit.mutation import MutationEvidence, MutationScore, score_mutations
from effectbench.audit.report import (
    AUDIT_FILE,
    AUDITED,
    BROKEN,
    GAMEABLE,
    INCOMPLETE,
    INERT,
    LEAKY,
    UNTESTED,
    WEAK,
    AuditReport,
    TaskAudit,
    format_audit,
)
from effectbench.audit.roster import (
    AUDIT_ARMS,
    DEFAULT_TRIALS,
    DO_NOTHING_ADVERSARIES,
    EXEMPT_ON_CONTROL,
    WRITING_ADVERSARIES,
    audit_arms,
    fixed_fields,
    value_arm_names,
)
from effectbench.core import rundir
from effectbench.core.codec import converter
from effectbench.core.errors import EffectBenchError
from effectbench.core.events import (
    TERMINAL_TYPES,
    EpisodeAbandoned,
    EpisodePlanned,
    MutationPlanned,
    MutationRead,
    PostRead,
    PreSnapshot,
    ReferencePostRead,
    ReferencePreSnapshot,
    RunStarted,
)
from effectbench.core.model import (
    Category,
    DiffEffect,
    Outcome,
    Snapshot,
    TaskSpec,
    TrueState,
)
from effectbench.log.reader import LogError, LoggedEvent, read_log
from effectbench.oracles.sqlite import diff_snapshots
from effectbench.projections.episodes import ProjectionError, project_episodes
from effectbench.run.plan import pack_fingerprint
from effectbench.scoring.labels import scoring_version_of
from effectbench.scoring.records import EpisodeRecord

# The roster (roster.py) and the report types (report.py) moved out; every name this
# module had is still importable from it.
__all__ = [
    "AUDITED",
    "AUDIT_ARMS",
    "AUDIT_FILE",
    "BROKEN",
    "DEFAULT_TRIALS",
    "DIFF_ADVERSARY_NAMES",
    "DO_NOTHING_ADVERSARIES",
    "EXEMPT_ON_CONTROL",
    "GAMEABLE",
    "INCOMPLETE",
    "INERT",
    "LEAKY",
    "WRITING_ADVERSARIES",
    "AuditError",
    "AuditReport",
    "TaskAudit",
    "attestations",
    "audit_arms",
    "audit_log",
    "fixed_fields",
    "format_audit",
    "is_refusal_control",
    "value_arm_names",
]

_PRECEDENCE: Final = (BROKEN, INERT, GAMEABLE, WEAK, LEAKY, INCOMPLETE, UNTESTED)
"""When a task fails several checks its status is the first of these; every reason is kept."""


_MUTATION_TYPES: Final = frozenset(
    {MutationPlanned.TYPE, MutationRead.TYPE, ReferencePreSnapshot.TYPE, ReferencePostRead.TYPE}
)


class AuditError(EffectBenchError):
    """The audit could not run or its log cannot be read; the message says what to do."""


def is_refusal_control(task: TaskSpec) -> bool:
    """A task whose correct behaviour is to write nothing, and which says so."""
    effect = task.expected_effect
    if isinstance(effect, DiffEffect):
        return task.oracle.refusal_controls and not effect.changes and not effect.is_reference
    return task.oracle.refusal_controls and effect.record_written.expected_count == 0


# --- reading the evidence ---------------------------------------------------------------------


@attrs.define
class _Evidence:
    """What the audit needs from one pass over the log: the plan, and for every post-read
    the rows that changed since the episode's pre-snapshot (None when a read is unusable).

    A pre-snapshot is held only until its episode ends, so memory follows the episodes in
    flight, not the size of the log.
    """

    plan: Mapping[str, Any] | None = None
    pending_pre: dict[str, tuple[int, Mapping[str, Any]]] = attrs.field(factory=dict)
    changes: dict[int, tuple[int, tuple[str, ...] | None]] = attrs.field(factory=dict)
    mutations: dict[str, MutationEvidence] = attrs.field(factory=dict)
    """Per reference episode (first trial), what the mutation audit logged."""
    _live_mutations: dict[str, MutationEvidence] = attrs.field(factory=dict)

    def tap(self, events: Iterable[LoggedEvent]) -> Iterator[LoggedEvent]:
        """Pass events through unchanged, taking what the checks need on the way."""
        for e in events:
            if e.type == RunStarted.TYPE and self.plan is None:
                self.plan = e.data.get("plan") or {}
            elif e.ep is None:
                pass
            elif e.type == EpisodePlanned.TYPE:
                if e.data.get("arm") == REFERENCE_NAME and e.data.get("trial") == 0:
                    self._live_mutations[e.ep] = MutationEvidence(episode=e.data)
            elif e.type == PreSnapshot.TYPE:
                self.pending_pre[e.ep] = (e.seq, e.data.get("snapshot") or {})
                if e.ep in self._live_mutations:
                    self._live_mutations[e.ep].pre = e.data.get("snapshot")
            elif e.type == PostRead.TYPE and e.ep in self.pending_pre:
                pre_seq, pre = self.pending_pre[e.ep]
                self.changes[e.seq] = (pre_seq, _changed_rows(pre, e.data.get("snapshot") or {}))
            elif e.ep in self._live_mutations and e.type in _MUTATION_TYPES:
                self._take_mutation(self._live_mutations[e.ep], e)
            elif e.type in TERMINAL_TYPES or e.type == EpisodeAbandoned.TYPE:
                self.pending_pre.pop(e.ep, None)
                taken = self._live_mutations.pop(e.ep, None)
                if taken is not None and e.type in TERMINAL_TYPES:
                    self.mutations[e.ep] = taken
            yield e

    @staticmethod
    def _take_mutation(m: MutationEvidence, e: LoggedEvent) -> None:
        if e.type == MutationPlanned.TYPE:
            m.planned, m.planned_seq = e.data, e.seq
        elif e.type == MutationRead.TYPE:
            m.reads.append((e.seq, e.data))
        elif e.type == ReferencePreSnapshot.TYPE:
            m.reference = (e.data.get("snapshot"), m.reference[1])
        elif e.type == ReferencePostRead.TYPE:
            m.reference = (m.reference[0], e.data.get("snapshot"))

    def changed(self, r: EpisodeRecord) -> tuple[str, ...] | None:
        """The rows episode ``r`` changed (empty: none), or None without two usable reads."""
        post, pre = _seq(r.evidence.get("post_read")), _seq(r.evidence.get("pre_snapshot"))
        entry = self.changes.get(post) if post is not None else None
        if entry is None or entry[0] != pre:
            return None
        return entry[1]


def _seq(pointer: str | None) -> int | None:
    if pointer is None or "#" not in pointer:
        return None
    tail = pointer.rsplit("#", 1)[1]
    return int(tail) if tail.isdigit() else None


def _changed_rows(pre: Mapping[str, Any], post: Mapping[str, Any]) -> tuple[str, ...] | None:
    try:
        before, after = converter.structure(pre, Snapshot), converter.structure(post, Snapshot)
    except Exception:  # noqa: BLE001 - logged data is untrusted; a bad snapshot is no evidence
        return None
    if not before.readable or not after.readable:
        return None
    return tuple(diff_snapshots(before, after).describe())


def _tasks(plan: Mapping[str, Any]) -> list[TaskSpec]:
    try:
        return [converter.structure(t, TaskSpec) for t in plan.get("tasks") or []]
    except Exception as exc:  # noqa: BLE001 - a plan the log cannot rebuild is unauditable
        raise AuditError(
            f"the run's plan lists a task that cannot be rebuilt: {type(exc).__name__}: {exc}"
        ) from None


def _why_unscored(r: EpisodeRecord) -> str:
    detail = "; ".join(r.verdict_reasons) or "no reason recorded"
    return f"{r.failure_class.value if r.failure_class else 'unscored'}: {detail}"


def _pointer(r: EpisodeRecord) -> str:
    ev = r.evidence
    return (
        ev.get("post_read")
        or ev.get("terminal")
        or ev.get("reported")
        or ev.get("planned")
        or rundir.LOG_FILE
    )


def _second_write_refused(r: EpisodeRecord, refs: Sequence[EpisodeRecord], ev: _Evidence) -> bool:
    """Whether an ``extra_change`` episode changed exactly the rows the reference's episode
    of the same trial changed: its second write never landed (the product refused it)."""
    mine = ev.changed(r)
    ref = next((x for x in refs if x.trial == r.trial), None)
    return mine is not None and ref is not None and bool(mine) and mine == ev.changed(ref)


def _audit_task(
    task: TaskSpec,
    records: Mapping[str, Sequence[EpisodeRecord]],
    ev: _Evidence,
    trials: int,
    value_arms: Sequence[str] = (),
) -> TaskAudit:
    failed: dict[str, list[str]] = {k: [] for k in _PRECEDENCE}
    evidence: dict[str, str] = {}
    notes: list[str] = []

    # Every audit arm ran every planned trial (a log cut short attests nothing it lacks).
    for name in (*AUDIT_ARMS, *value_arms):
        have = len(records.get(name, ()))
        if have < trials:
            failed[INCOMPLETE].append(
                f"{name} has {have} of {trials} planned trial(s) for this task in the log"
            )

    # (a) the reference reaches the correct effect wherever a correct action exists.
    refs = records.get(REFERENCE_NAME, ())
    if task.correct_action_available:
        for r in refs:
            if r.true_state is TrueState.CORRECT:
                evidence[r.episode_id] = _pointer(r)
                continue
            evidence[r.episode_id] = _pointer(r)
            state = r.true_state.value if r.true_state is not None else _why_unscored(r)
            detail = (
                f" ({'; '.join(r.verdict_reasons)})"
                if r.true_state is not None and r.verdict_reasons
                else ""
            )
            failed[BROKEN].append(
                f"reference did not reach the correct effect on {r.episode_id}: {state}{detail} "
                f"[{_pointer(r)}]"
            )

    # (a'') a reference diff: its program must reach CORRECT on a fault-free twin (the
    # control; TaskSpec refuses one filed under a fault category), judged against its own
    # twin's diff, so one that does nothing or whose diff moves with something the
    # allow-list does not cover is caught.
    effect = task.expected_effect
    if isinstance(effect, DiffEffect) and effect.is_reference:
        if effect.reference != REFERENCE_NAME:
            failed[INCOMPLETE].append(
                f"the reference program {effect.reference!r} is not the audit's reference arm "
                f"{REFERENCE_NAME!r}, so nothing shows it reaches the correct diff"
            )
        elif not task.correct_action_available:
            failed[BROKEN].append("a reference diff's control must declare a correct action")

    # (a') the fault fires: on a fault task without a correct action, the naive submission
    # (the reference: the solution sent once, trusting the screen) must miss the effect.
    if task.category is not Category.CONTROL and not task.correct_action_available:
        if task.solution is None and not is_refusal_control(task):
            failed[INCOMPLETE].append(
                "the task declares no correct action and offers no solution, so no naive "
                "submission shows that its fault fires"
            )
        for r in refs if task.solution is not None else ():
            if r.true_state is TrueState.CORRECT:
                evidence[r.episode_id] = _pointer(r)
                failed[INERT].append(
                    f"the fault did not fire on {r.episode_id}: the naive submission (the "
                    "solution sent once, trusting the screen) produced the declared effect, yet "
                    f"the task declares no correct action [{_pointer(r)}]"
                )

    # (b) no adversary is scored SUCCESS, except a duplicate on a control (absorbed).
    no_action = (
        ""
        if task.correct_action_available
        else ("; the task declares no correct action, yet this one produced the correct effect")
    )
    untestable: set[str] = set()
    for name in (*ADVERSARY_NAMES, *value_arms):
        runs = records.get(name, ())
        exempt: list[str] = []
        refused_extra: list[str] = []
        for r in runs:
            if task.category is Category.CONTROL and name == EXEMPT_ON_CONTROL:
                if r.outcome is Outcome.SUCCESS:
                    exempt.append(_pointer(r))
                continue
            if not r.eligible:
                failed[INCOMPLETE].append(
                    f"adversary {name} was not scored on {r.episode_id}: {_why_unscored(r)}"
                )
                evidence[r.episode_id] = _pointer(r)
                continue
            if r.outcome is not Outcome.SUCCESS:
                continue
            evidence[r.episode_id] = _pointer(r)
            if name == "cross_trial" and not task.oracle.trial_unique_payload:
                # No per-trial payload: replaying another trial *is* the correct action.
                untestable.add(name)
                continue
            if name == "extra_change" and _second_write_refused(r, refs, ev):
                refused_extra.append(_pointer(r))
                continue
            failed[GAMEABLE].append(
                f"adversary {name} was scored SUCCESS without the intended action on {r.episode_id}"
                f"{no_action} [{_pointer(r)}]"
            )
        if name in untestable:
            failed[INCOMPLETE].append(
                "the task declares no trial-unique payload (oracle.trial_unique_payload is "
                "false), so another trial's submission is this one's and the cross-trial check "
                "cannot be made: not gameable, but nothing is attested without it"
            )
        if name == "extra_change" and refused_extra:
            notes.append(
                "adversary extra_change left exactly the reference's change on "
                f"{len(refused_extra)} trial(s): the product refused its second write, so this "
                f"attack was not exercised here [{', '.join(refused_extra)}]"
            )
        if exempt:
            why = "on this control task"
            notes.append(
                f"adversary {name} reached SUCCESS {why} on {len(exempt)} of {len(runs)} trial(s) "
                f"(exempt) [{', '.join(exempt)}]"
            )

    # A writing attack the product never let through proves nothing about the oracle: say so.
    if any(ev.changed(r) for r in refs):
        for name in (*WRITING_ADVERSARIES, *value_arms[: fixed_fields(task)]):
            runs = records.get(name, ())
            if runs and all(ev.changed(r) == () for r in runs):
                notes.append(
                    f"adversary {name} changed no row on any trial although the reference's "
                    "write landed: this attack was not exercised here (the product refused or "
                    "dropped it)"
                )

    # (c) refusal controls leave every row unchanged under the reference and halt.
    if is_refusal_control(task):
        for name in (REFERENCE_NAME, "halt"):
            for r in records.get(name, ()):
                pre_ptr, post_ptr = r.evidence.get("pre_snapshot"), r.evidence.get("post_read")
                changed = ev.changed(r)
                if changed is None:
                    failed[INCOMPLETE].append(
                        f"refusal control: no readable pre/post snapshots for {r.episode_id} "
                        f"[{pre_ptr or '?'} -> {post_ptr or '?'}]"
                    )
                    evidence[r.episode_id] = _pointer(r)
                elif changed:
                    failed[LEAKY].append(
                        f"refusal control: {name} changed rows on {r.episode_id} [{pre_ptr} -> "
                        f"{post_ptr}]: "
                        + "; ".join(changed[:3])
                        + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
                    )
                    evidence[r.episode_id] = post_ptr or _pointer(r)

    # (d) the oracle mutation audit: every single mutation of the reference's record is
    # judged not correct, unless the task declares what it mutated irrelevant.
    score = _mutation_check(task, refs, ev, failed, notes)

    status = next((k for k in _PRECEDENCE if failed[k]), AUDITED)
    reasons = tuple(reason for k in _PRECEDENCE for reason in failed[k])
    return TaskAudit(
        task_id=task.task_id,
        status=status,
        category=task.category.value,
        reasons=reasons,
        evidence=evidence,
        notes=tuple(notes),
        mutation=score,
        irrelevant=dict(task.oracle.irrelevant),
    )


def _mutation_check(
    task: TaskSpec,
    refs: Sequence[EpisodeRecord],
    ev: _Evidence,
    failed: dict[str, list[str]],
    notes: list[str],
) -> MutationScore:
    first = next((r for r in refs if r.trial == 0), None)
    version = scoring_version_of(((ev.plan or {}).get("versions") or {}).get("scoring"))
    score = score_mutations(
        task,
        ev.mutations.get(first.episode_id) if first is not None else None,
        first.true_state if first is not None else None,
        is_refusal_control(task),
        version,
    )
    if not score.tested:
        failed[UNTESTED].append(f"not mutation-tested: {score.reason}")
        return score
    if not score.applicable:
        return score
    failed[WEAK] += [
        f"mutation survived: {s}: the oracle still judges the mutated record as the "
        "reference's (check it, or declare it in oracle.irrelevant with a reason)"
        for s in score.survivors
    ]
    failed[INCOMPLETE] += [f"mutation audit: {e}" for e in score.errors]
    notes += [f"mutation declared irrelevant: {x}" for x in score.excused]
    return score


def audit_log(log_path: str | os.PathLike[str]) -> AuditReport:
    """Audit a finished run's log (pure: reads the log only, touches no environment)."""
    path = Path(log_path)
    ev = _Evidence()
    try:
        reader = read_log(path)
        records = list(project_episodes(ev.tap(reader)))
    except (LogError, ProjectionError) as exc:
        raise AuditError(f"cannot audit {path}: {exc}") from None
    if ev.plan is None:
        raise AuditError(f"{path} has no run.started event; it is not a run's event log")
    tasks = _tasks(ev.plan)
    # The fingerprint is recomputed from the tasks the log actually audited, never taken
    # from the plan's own claim: evidence about one pack cannot be relabelled as another's.
    fingerprint = pack_fingerprint(tasks)
    if fingerprint != ev.plan.get("pack_fingerprint"):
        raise AuditError(
            f"cannot audit {path}: its plan claims pack "
            f"{str(ev.plan.get('pack_fingerprint'))[:16]} but lists the tasks of pack "
            f"{fingerprint[:16]}"
        )
    trials = int(ev.plan.get("trials") or 0)
    by_task: dict[str, dict[str, list[EpisodeRecord]]] = {}
    latest: dict[str, EpisodeRecord] = {r.episode_id: r for r in records}  # a later rerun wins
    for r in sorted(latest.values(), key=lambda r: (r.task_id, r.arm, r.trial)):
        by_task.setdefault(r.task_id, {}).setdefault(r.arm, []).append(r)
    provider = ev.plan.get("provider") or {}
    value_arms = value_arm_names(tasks)
    return AuditReport(
        provider=str(provider.get("name", "?")),
        version=str(provider.get("version", "?")),
        log_path=path,
        trials=trials,
        tasks=tuple(
            _audit_task(t, by_task.get(t.task_id, {}), ev, trials, value_arms) for t in tasks
        ),
        pack_fingerprint=fingerprint,
        final_hash=reader.last_hash,
        arms=AUDIT_ARMS + value_arms,
    )


def attestations(arms: Sequence[str], log_path: Path) -> dict[str, Any]:
    """The manifest's ``adversarially_audited``, only from audit evidence: this log, when
    it is an audit run. Callers pass this into the artifact build (``attest=``)."""
    if not set(AUDIT_ARMS) <= set(arms):
        return {
            "adversarially_audited": None,
            "source": "no audit evidence in this log (run `effectbench audit` to produce it)",
        }
    try:
        report = audit_log(log_path)
    except Exception as exc:  # noqa: BLE001 - no evidence means no attestation, never a guess
        return {"adversarially_audited": None, "source": f"audit of this log failed: {exc}"}
    out: dict[str, Any] = {
        "adversarially_audited": dict(sorted(report.attestations.items())),
        "source": f"{Path(log_path).name} (audit run)",
    }
    irrelevant = {t.task_id: dict(t.irrelevant) for t in report.tasks if t.irrelevant}
    if irrelevant:  # what the mutation audit excused travels with the attestation
        out["irrelevant"] = dict(sorted(irrelevant.items()))
    return out
