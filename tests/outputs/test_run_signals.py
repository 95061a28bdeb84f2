"""Signals a provider author needs at run time (issue 29 item 6): the run summary warns
about a task that declares no correct action yet reached SUCCESS on every trial."""

from __future__ import annotations

from pathlib import Path

import attrs

from effectbench.api import evaluate_provider
from effectbench.arms.baselines import ScreenOnlyArm
from effectbench.outputs.signals import run_warnings
from effectbench.testing import InMemoryProvider, memory_task


def test_a_task_without_a_correct_action_that_succeeds_every_trial_is_warned_about(
    tmp_path: Path,
) -> None:
    """fake::ok stores the note as asked, so declaring it impossible is the author's
    mistake: screen_only reaches SUCCESS on both trials and the summary says so; the honest
    control is not named, and a run without such a task has no Warnings section."""
    wrong = attrs.evolve(memory_task("ok", correct=False), task_id="fake::declared_impossible")
    provider = InMemoryProvider(tasks=[wrong, memory_task("ok")])
    arms = [ScreenOnlyArm()]
    result = evaluate_provider(arms, provider, trials=2, out=tmp_path / "run")
    summary = (result.run_dir / "summary.md").read_text()
    warnings = summary.split("## Warnings\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in warnings.splitlines() if line.startswith("- ")]
    expected = (
        "- task fake::declared_impossible declares no correct action, yet screen_only reached "
        "SUCCESS on every trial (2/2): fix correct_action_available, or check that the "
        "task's fault fires"
    )
    assert lines == [expected]
    honest = evaluate_provider(
        arms, InMemoryProvider(tasks=[memory_task("ok")]), trials=1, out=tmp_path / "honest"
    )
    assert "## Warnings" not in (honest.run_dir / "summary.md").read_text()


def test_a_sealed_tasks_redacted_entry_is_not_warned_about() -> None:
    """A test-split task's manifest entry does not say whether it has a correct action
    (mockmed-full's sealed-1 reached SUCCESS on every trial, as its control should)."""
    row = {"task_id": "sealed-1", "n_episodes": 2, "outcome_counts": {"success": 2}}
    metrics = {"arms": {"screen_only": {"per_task": [row]}}}
    assert run_warnings({"tasks": [{"task_id": "sealed-1"}]}, metrics) == []
    declared = {"tasks": [{"task_id": "sealed-1", "correct_action_available": False}]}
    assert len(run_warnings(declared, metrics)) == 1
