"""The public pack manifest: what a provider's task pack may say about itself in public.

Dev-split tasks are published whole enough to reproduce: goal, oracle wiring and the
hash of the declared effect. Tasks of the sequestered ``test`` split publish only the
axes results are cut by (id, title, category, substrate, split); their goal, oracle
wiring, effect hash and remaining attributes stay out, so a system cannot be tuned
to them. Runs still score them: the run's log holds each episode's resolved effect.

The fingerprint is ``effectbench.plan.pack_fingerprint`` over every task, the test
split included, so a published pack pins the sealed tasks without revealing them.

``adversarially_audited`` is never taken from what a provider typed into its
OracleSpec: it is null unless audit evidence is given, and then it is re-derived
from that audit's event log (``effectbench.audit.audit_log``), which must be an audit
of this very pack (same fingerprint).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from effectbench.core.errors import EffectBenchError
from effectbench.core.hashing import content_hash
from effectbench.core.model import SPEC_VERSION, Split, TaskSpec
from effectbench.core.provider import BenchmarkProvider
from effectbench.core.redaction import SEALED_KEYS, redact_task_entry
from effectbench.run.plan import pack_fingerprint

if TYPE_CHECKING:
    from effectbench.audit.report import AuditReport

__all__ = [
    "PACK_SCHEMA",
    "SEALED_KEYS",
    "PackError",
    "pack_fingerprint",
    "public_pack_manifest",
    "public_task_entry",
    "redact_task_entry",
]

PACK_SCHEMA: Final = "effectbench.pack/1"


class PackError(EffectBenchError, ValueError):
    """Audit evidence that does not belong to the pack being published."""


def public_task_entry(task: TaskSpec) -> dict[str, Any]:
    """One task as the public manifest lists it (redacted when it is in the test split)."""
    entry: dict[str, Any] = {
        "task_id": task.task_id,
        "title": task.title,
        "category": task.category.value,
        "substrate": task.substrate.value,
        "split": task.split.value,
    }
    if task.split is Split.TEST:
        entry["sealed"] = True
        return entry
    entry.update(
        {
            "reversible": task.reversible,
            "effect_declared": task.effect_declared,
            "correct_action_available": task.correct_action_available,
            "goal": task.goal,
            "oracle": attrs.asdict(task.oracle),
            "effect_hash": content_hash(task.expected_effect),
            "sealed": False,
        }
    )
    return entry


def public_pack_manifest(
    provider: BenchmarkProvider,
    tasks: Sequence[TaskSpec] | None = None,
    *,
    audit: AuditReport | None = None,
) -> dict[str, Any]:
    """The provider's pack as it may be published: name, version, fingerprint, tasks.

    With ``audit`` (an AuditReport re-derived from an audit log of this pack), each
    public task's ``oracle.adversarially_audited`` is that evidence's verdict and an
    ``audit`` block pins the log; without it the attestation is null (not established).
    """
    listed = tuple(provider.tasks() if tasks is None else tasks)
    fingerprint = pack_fingerprint(listed)
    attested: Mapping[str, bool] = {}
    audit_block: dict[str, Any] | None = None
    if audit is not None:
        if audit.pack_fingerprint != fingerprint:
            raise PackError(
                f"the audit evidence is of pack {audit.pack_fingerprint[:16] or '?'}, not of "
                f"{provider.name}'s pack {fingerprint[:16]}: run effectbench audit --provider "
                f"{provider.name} again and pass its run directory"
            )
        attested = audit.attestations
        audit_block = {
            "log_final_hash": audit.final_hash,
            "trials": audit.trials,
            "audited": sum(attested.values()),
            "tasks": len(attested),
        }
    entries = [public_task_entry(t) for t in listed]
    for entry in entries:
        if "oracle" in entry:
            entry["oracle"]["adversarially_audited"] = attested.get(entry["task_id"])
    return {
        "schema": PACK_SCHEMA,
        "spec": SPEC_VERSION,
        "name": provider.name,
        "version": provider.version,
        "fingerprint": fingerprint,
        "audit": audit_block,
        "counts": {
            "tasks": len(entries),
            "sealed": sum(1 for e in entries if e["sealed"]),
        },
        "tasks": entries,
    }
