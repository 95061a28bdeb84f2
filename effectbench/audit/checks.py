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
``AuditReport``, ``format_audit``) is ``report.py``; what it reads from the log is
``evidence.py``; each check is a rule of ``rules.TASK_RULES`` (docs/audit.md lists them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from effectbench.arms.adversaries import DIFF_ADVERSARY_NAMES, REFERENCE_NAME
from effectbench.audit.evidence import LogEvidence
from effectbench.audit.report import (
    AUDIT_FILE,
    AUDITED,
    BROKEN,
    GAMEABLE,
    INCOMPLETE,
    INERT,
    LEAKY,
    PRECEDENCE,
    UNTESTED,
    WEAK,
    AuditReport,
    AuditStatus,
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
from effectbench.audit.rules import TaskFacts, audit_task, is_refusal_control, mutation_score
from effectbench.core.codec import converter
from effectbench.core.errors import EffectBenchError
from effectbench.core.model import TaskSpec
from effectbench.log.reader import LogError, read_log
from effectbench.projections.episodes import ProjectionError, project_episodes
from effectbench.run.plan import pack_fingerprint
from effectbench.scoring.records import EpisodeRecord

# The roster (roster.py), the report types (report.py) and the rules (rules.py) moved out;
# every name this module had is still importable from it.
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
    "PRECEDENCE",
    "UNTESTED",
    "WEAK",
    "WRITING_ADVERSARIES",
    "AuditError",
    "AuditReport",
    "AuditStatus",
    "TaskAudit",
    "attestations",
    "audit_arms",
    "audit_log",
    "fixed_fields",
    "format_audit",
    "is_refusal_control",
    "value_arm_names",
]


class AuditError(EffectBenchError):
    """The audit could not run or its log cannot be read; the message says what to do."""


def _tasks(plan: Mapping[str, Any]) -> list[TaskSpec]:
    try:
        return [converter.structure(t, TaskSpec) for t in plan.get("tasks") or []]
    except Exception as exc:  # noqa: BLE001 - a plan the log cannot rebuild is unauditable
        raise AuditError(
            f"the run's plan lists a task that cannot be rebuilt: {type(exc).__name__}: {exc}"
        ) from None


def _audit_task(
    task: TaskSpec,
    records: Mapping[str, Sequence[EpisodeRecord]],
    ev: LogEvidence,
    trials: int,
    value_arms: tuple[str, ...] = (),
) -> TaskAudit:
    """One task's verdict: its facts, then every rule of ``rules.TASK_RULES``."""
    score = mutation_score(task, records.get(REFERENCE_NAME, ()), ev)
    return audit_task(TaskFacts(task, records, ev, trials, score, value_arms))


def audit_log(log_path: str | os.PathLike[str]) -> AuditReport:
    """Audit a finished run's log (pure: reads the log only, touches no environment)."""
    path = Path(log_path)
    ev = LogEvidence()
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
