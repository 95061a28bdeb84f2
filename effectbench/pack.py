"""The public pack manifest: what a provider's task pack may say about itself in public.

Dev-split tasks are published whole enough to reproduce: goal, oracle wiring and the
hash of the declared effect. Tasks of the sequestered ``test`` split publish only the
axes results are cut by (id, title, category, substrate, split); their goal, oracle
wiring, effect hash and remaining attributes stay out, so a system cannot be tuned
to them. Runs still score them: the run's log holds each episode's resolved effect.

The fingerprint is ``effectbench.plan.pack_fingerprint`` over every task, the test
split included, so a published pack pins the sealed tasks without revealing them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from effectbench.model import SPEC_VERSION, Split, TaskSpec
from effectbench.plan import pack_fingerprint
from effectbench.provider import BenchmarkProvider

__all__ = [
    "PACK_SCHEMA",
    "SEALED_KEYS",
    "pack_fingerprint",
    "public_pack_manifest",
    "public_task_entry",
    "redact_task_entry",
]

PACK_SCHEMA: Final = "effectbench.pack/1"

SEALED_KEYS: Final = ("task_id", "title", "category", "substrate", "split")
"""The only fields a test-split task publishes."""


def _is_sealed(split: object) -> bool:
    return str(split) == Split.TEST.value


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
            "effect_hash": task.expected_effect.content_hash(),
            "sealed": False,
        }
    )
    return entry


def redact_task_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Apply the public redaction to an already-built task entry (e.g. a run manifest's):
    a test-split entry keeps only ``SEALED_KEYS`` and is marked sealed; others pass as is."""
    if not _is_sealed(entry.get("split")):
        return dict(entry)
    kept = {k: entry[k] for k in SEALED_KEYS if k in entry}
    kept["sealed"] = True
    return kept


def public_pack_manifest(
    provider: BenchmarkProvider, tasks: Sequence[TaskSpec] | None = None
) -> dict[str, Any]:
    """The provider's pack as it may be published: name, version, fingerprint, tasks."""
    listed = tuple(provider.tasks() if tasks is None else tasks)
    entries = [public_task_entry(t) for t in listed]
    return {
        "schema": PACK_SCHEMA,
        "spec": SPEC_VERSION,
        "name": provider.name,
        "version": provider.version,
        "fingerprint": pack_fingerprint(listed),
        "counts": {
            "tasks": len(entries),
            "sealed": sum(1 for e in entries if e["sealed"]),
        },
        "tasks": entries,
    }
