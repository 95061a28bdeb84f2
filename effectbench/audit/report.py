"""What an audit found, as values: a task's status with its reasons and evidence, the
report of one provider (``audit.json``, the attestations) and its plain-text table. Kept
apart from the checks so a reader of a report (the CLI, a plugin's test) needs no log."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

import attrs

from effectbench.audit.mutation import MutationScore
from effectbench.audit.roster import AUDIT_ARMS
from effectbench.core import rundir

__all__ = [
    "AUDITED",
    "AUDIT_FILE",
    "BROKEN",
    "GAMEABLE",
    "INCOMPLETE",
    "INERT",
    "LEAKY",
    "PRECEDENCE",
    "UNTESTED",
    "WEAK",
    "AuditReport",
    "AuditStatus",
    "TaskAudit",
    "format_audit",
]

AUDIT_FILE: Final = rundir.AUDIT_FILE


class AuditStatus(StrEnum):
    """A task's verdict. A ``str`` enum, so ``audit.json`` and the table print the value."""

    AUDITED = "audited"
    BROKEN = "broken"
    """The reference cannot reach the declared effect: the task cannot be done as written."""
    INERT = "inert"
    """The fault the task exists to test did not fire."""
    GAMEABLE = "gameable"
    """An adversary was scored SUCCESS without the intended action."""
    WEAK = "weak"
    """A single mutation of the reference's record survived the oracle (the mutation audit)."""
    LEAKY = "leaky"
    """A refusal control's record changed under the reference or ``halt``."""
    INCOMPLETE = "incomplete"
    """Evidence a check needs is missing, so nothing is attested from it."""
    UNTESTED = "not mutation-tested"
    """The task's store could not be mutated, so nothing shows its oracle reads what matters."""


AUDITED: Final = AuditStatus.AUDITED
BROKEN: Final = AuditStatus.BROKEN
INERT: Final = AuditStatus.INERT
GAMEABLE: Final = AuditStatus.GAMEABLE
LEAKY: Final = AuditStatus.LEAKY
INCOMPLETE: Final = AuditStatus.INCOMPLETE
WEAK: Final = AuditStatus.WEAK
UNTESTED: Final = AuditStatus.UNTESTED

PRECEDENCE: Final = (BROKEN, INERT, GAMEABLE, WEAK, LEAKY, INCOMPLETE, UNTESTED)
"""When a task fails several checks its status is the first of these; every reason is kept."""


@attrs.frozen
class TaskAudit:
    """One task's verdict. ``evidence`` maps an episode id to its pointer into the log
    (``events.jsonl#<seq>``): the offending episodes, or the reference's correct reads.
    ``notes`` are findings that do not fail the task (e.g. an adversary exempt on a control)."""

    task_id: str
    status: AuditStatus = attrs.field(converter=AuditStatus)
    category: str
    reasons: tuple[str, ...] = ()
    evidence: Mapping[str, str] = attrs.field(factory=dict)
    notes: tuple[str, ...] = ()
    mutation: MutationScore | None = None
    """The oracle mutation audit's score (None: a report built without one)."""
    irrelevant: Mapping[str, str] = attrs.field(factory=dict)
    """What the task declares its oracle may ignore (``oracle.irrelevant``): the mutation
    audit excused survivors there, so the attestation carries the list."""

    @property
    def audited(self) -> bool:
        return self.status == AUDITED


@attrs.frozen
class AuditReport:
    """The audit of one provider. ``attestations`` is derived here, from the log's evidence."""

    provider: str
    version: str
    log_path: Path
    trials: int
    tasks: tuple[TaskAudit, ...]
    pack_fingerprint: str = ""
    """The audited pack's fingerprint, from the audit log's plan: what the evidence is about."""
    final_hash: str = ""
    """The audit log's final chain hash, so a manifest can pin the evidence it cites."""
    arms: tuple[str, ...] = AUDIT_ARMS
    """Every arm the audit required: AUDIT_ARMS and the per-field ``wrong_value_<i>``."""

    @property
    def ok(self) -> bool:
        return bool(self.tasks) and all(t.audited for t in self.tasks)

    @property
    def attestations(self) -> dict[str, bool]:
        """task_id -> adversarially_audited, True exactly for tasks whose status is audited."""
        return {t.task_id: t.audited for t in self.tasks}

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "version": self.version,
            "log": self.log_path.name,
            "trials": self.trials,
            "pack_fingerprint": self.pack_fingerprint,
            "final_hash": self.final_hash,
            "ok": self.ok,
            "arms": list(self.arms),
            "attestations": self.attestations,
            "tasks": [
                {
                    "task_id": t.task_id,
                    "status": t.status,
                    "category": t.category,
                    "reasons": list(t.reasons),
                    "evidence": dict(t.evidence),
                    "notes": list(t.notes),
                    "mutation": None if t.mutation is None else t.mutation.plain(),
                    "irrelevant": dict(t.irrelevant),
                }
                for t in self.tasks
            ],
        }


def format_audit(report: AuditReport) -> str:
    """A plain-text table: one row per task, its reasons and notes indented beneath."""
    width = max([len("task"), *(len(t.task_id) for t in report.tasks)])
    cat_w = max([len("category"), *(len(t.category) for t in report.tasks)])
    head = (
        f"audit of {report.provider} {report.version}: {len(report.tasks)} tasks x "
        f"{len(report.arms)} arms"
    )
    lines = [
        f"{head} x {report.trials} trials",
        f"{'task':<{width}}  {'category':<{cat_w}}  status",
        f"{'-' * width}  {'-' * cat_w}  ----------",
    ]
    for t in report.tasks:
        lines.append(f"{t.task_id:<{width}}  {t.category:<{cat_w}}  {t.status}")
        if t.mutation is not None and t.mutation.tested:
            lines.append(f"    {t.mutation.summary()}")
        lines += [f"    - {r}" for r in t.reasons]
        lines += [f"    note: {n}" for n in t.notes]
    n_ok = sum(t.audited for t in report.tasks)
    verdict = (
        "every task audited"
        if report.ok
        else f"{len(report.tasks) - n_ok} task(s) failed the audit"
    )
    lines.append(f"{n_ok}/{len(report.tasks)} audited: {verdict}. Evidence: {report.log_path}")
    return "\n".join(lines)
