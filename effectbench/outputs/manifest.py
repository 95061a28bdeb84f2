"""The manifest's parts that the log pass needs too: a task's entry (its axes, its
effect's hash, the public redaction of a test-split task)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from effectbench.core.hashing import content_hash
from effectbench.outputs.rows import TASK_AXES

__all__ = ["task_entry"]


def task_entry(task: Mapping[str, Any]) -> dict[str, Any]:
    from effectbench.core.codec import converter
    from effectbench.core.model import Effect

    entry = {key: task.get(key) for key in ("task_id", *TASK_AXES)}
    try:
        entry["effect_hash"] = content_hash(converter.structure(task["expected_effect"], Effect))
    except Exception:  # noqa: BLE001 - a task the plan cannot rebuild has no hash to state
        entry["effect_hash"] = None
    entry["adversarially_audited_declared"] = bool(
        (task.get("oracle") or {}).get("adversarially_audited", False)
    )
    from effectbench.core.redaction import redact_task_entry

    # A test-split task is scored (the log holds its effect) but the manifest, which is
    # published with results, lists only its axes: the public pack's redaction.
    return redact_task_entry(entry)
