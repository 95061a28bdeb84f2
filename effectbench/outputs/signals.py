"""What a run's summary warns a provider author about, from the manifest and metrics alone.

A task that declares no correct action (``correct_action_available`` False) cannot be
done right, so an arm reaching SUCCESS on it (the correct effect, and it said so) on
every trial means the declaration is wrong or the task's fault never fires. The audit
notices it (a reference that produced the correct effect); a plain run used to say
nothing, though the per-task table held it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["run_warnings"]


def run_warnings(manifest: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[str]:
    """One line per (task, arm) where a task declaring no correct action reached SUCCESS
    on every one of its trials; empty for a sound pack."""
    impossible = {  # a sealed (test-split) task's entry is redacted: it says nothing
        t["task_id"]
        for t in manifest.get("tasks", ())
        if t.get("correct_action_available") is False
    }
    lines = []
    for arm in metrics.get("arm_order") or metrics.get("arms", {}):
        for row in metrics["arms"][arm].get("per_task", ()):
            n, successes = row["n_episodes"], row["outcome_counts"]["success"]
            if row["task_id"] in impossible and n and successes == n:
                lines.append(
                    f"task {row['task_id']} declares no correct action, yet {arm} reached "
                    f"SUCCESS on every trial ({successes}/{n}): fix correct_action_available, "
                    "or check that the task's fault fires"
                )
    return lines
