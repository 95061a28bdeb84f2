"""The example provider tested the way a plugin author would: through the fixtures and
helpers of effectbench.testing. No conftest: pytest loads the fixtures by itself (the
``pytest11`` entry point of the installed effectbench)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from effectbench_example_notes import NotesProvider

from effectbench.testing import ScriptedArm


def test_the_example_pack_passes_the_audit(effectbench_audit: Callable[..., Any]) -> None:
    report = effectbench_audit(NotesProvider(), trials=1)
    assert report.ok, [(t.task_id, t.status, t.reasons) for t in report.tasks]
    assert all(t.status == "audited" for t in report.tasks)


def test_a_scripted_arm_scores_the_faults_as_silent_wrong_effects(
    effectbench_run: Callable[..., Any],
) -> None:
    result = effectbench_run([ScriptedArm()], NotesProvider(), trials=2)
    arm = result.metrics["arms"]["scripted"]
    assert arm["swer"]["numerator"] > 0  # trusting the screen misses the clipped body
