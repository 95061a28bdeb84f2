"""Each rule of the verifier's tables (effectbench.verify.run_rules: the plan, each planned
episode, screenshots; effectbench.verify.submission_rules: each submitted row) on the
smallest input it refuses and one it accepts; and the tables and docs/leaderboard.md list
the same rules."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import pytest

from effectbench.core.codec import converter
from effectbench.core.events import ArmAction, ArmScreenshot
from effectbench.core.hashing import content_hash
from effectbench.core.model import DiffEffect, trial_params
from effectbench.outputs.artifacts import TASK_AXES
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.testing import memory_task
from effectbench.verify import run_rules, submission_rules
from effectbench.verify.compare import task_axis
from effectbench.verify.submission_rules import row_facts

ROOT = Path(__file__).resolve().parents[2]
TASK = memory_task()
PLAN = build_plan(ProviderInfo("fake", "0.1", "tests"), [TASK], ["screen_only"], 1)


def plan_facts(**change: Any) -> run_rules.PlanFacts:
    """The plan of one memory task, as run.started carries it, with ``change`` applied."""
    plan = {**PLAN.to_json(), **change}
    return run_rules.PlanFacts(0, plan, PLAN.plan_hash, (TASK,))


def test_plan_hash_is_the_plans() -> None:
    (why,) = run_rules.plan_hash_is_the_plans(plan_facts(trials=2))
    assert why == "plan_hash in run.started (#0) does not hash the plan it carries"
    assert list(run_rules.plan_hash_is_the_plans(plan_facts())) == []


def test_plan_tasks_rebuild() -> None:
    unbuilt = attrs.evolve(plan_facts(), tasks=None, unbuilt="category 'x' is not one of ...")
    (why,) = run_rules.plan_tasks_rebuild(unbuilt)
    assert why == "the plan's tasks cannot be rebuilt: category 'x' is not one of ..."
    assert list(run_rules.plan_tasks_rebuild(plan_facts())) == []


def test_fingerprint_is_the_tasks() -> None:
    (why,) = run_rules.fingerprint_is_the_tasks(plan_facts(pack_fingerprint="f" * 64))
    assert why == "pack fingerprint in the plan does not match its tasks"
    assert list(run_rules.fingerprint_is_the_tasks(plan_facts())) == []


def test_task_ids_are_the_tasks() -> None:
    (why,) = run_rules.task_ids_are_the_tasks(plan_facts(task_ids=["fake::other"]))
    assert why == "the plan's task_ids differ from its tasks"
    assert list(run_rules.task_ids_are_the_tasks(plan_facts())) == []


EP = "screen_only::fake::ok::t0"


def trial_fields(task: Any) -> dict[str, Any]:
    """What an episode.planned and a submitted row both carry of trial 0 of ``task``."""
    params = trial_params(task, 0)
    effect = task.expected_effect.resolve(params)
    return {
        "task_id": task.task_id,
        "trial": 0,
        "params": params,
        **{field: task_axis(task, field) for field in TASK_AXES},
        "effect": converter.unstructure(effect),
        "effect_hash": content_hash(effect),
    }


def planned(terminated: bool = False, ep: str = EP, **change: Any) -> run_rules.PlannedFacts:
    """Event #7, the episode.planned the scheduler writes for trial 0 of TASK, changed."""
    plan = trial_fields(TASK)
    data = {"arm": "screen_only", **plan, **change}
    task = TASK if data["task_id"] == TASK.task_id else None
    expected = (plan["params"], plan["effect_hash"])
    return run_rules.PlannedFacts(7, ep, data, task, terminated, *expected)


def reasons(found: Iterable[str]) -> list[str]:
    return list(found)


def test_planned_once() -> None:
    (why,) = run_rules.planned_once(planned(terminated=True))
    assert why.startswith(f"event #7 plans episode {EP} again after it terminated")
    assert reasons(run_rules.planned_once(planned())) == []


def test_planned_in_the_plan() -> None:
    (why,) = run_rules.planned_in_the_plan(planned(task_id="fake::nope"))
    assert why == f"event #7 plans episode {EP} for a task or trial not in the plan"
    (why,) = run_rules.planned_in_the_plan(planned(trial="0"))
    assert why.endswith("for a task or trial not in the plan")
    assert reasons(run_rules.planned_in_the_plan(planned())) == []


def test_planned_under_its_own_id() -> None:
    (why,) = run_rules.planned_under_its_own_id(planned(ep=EP + "-retry"))
    assert why == (
        f"event #7 plans (screen_only, fake::ok, 0) under the id '{EP}-retry', not '{EP}': "
        "a second id for one planned episode would replace it"
    )
    assert reasons(run_rules.planned_under_its_own_id(planned())) == []


def test_params_are_the_trial_payload() -> None:
    (why,) = run_rules.params_are_the_trial_payload(planned(params={"note": "forged"}))
    assert why == f"event #7 ({EP}): params are not the trial payload of (fake::ok, 0)"
    assert reasons(run_rules.params_are_the_trial_payload(planned())) == []


def test_effect_is_the_plans() -> None:
    wrong = f"event #7 ({EP}): the effect scored is not the plan's effect for this trial"
    assert reasons(run_rules.effect_is_the_plans(planned(effect_hash="1" * 64))) == [wrong]
    assert reasons(run_rules.effect_is_the_plans(planned(effect={"x": 1}))) == [wrong]
    assert reasons(run_rules.effect_is_the_plans(planned())) == []


def test_axes_are_the_plans() -> None:
    (why,) = run_rules.axes_are_the_plans(planned(split="test"))
    assert why == f"event #7 ({EP}): split 'test' differs from the plan"
    assert reasons(run_rules.axes_are_the_plans(planned())) == []


def test_screenshot_is_the_stored_image() -> None:
    shot = run_rules.ImageFacts(ArmScreenshot.TYPE, 3, EP, {}, "blobs/sha256/a.png is missing")
    (why,) = run_rules.screenshot_is_the_stored_image(shot)
    assert why == f"event #3 ({EP}): screenshot blobs/sha256/a.png is missing"
    stored = attrs.evolve(shot, problem=None)
    assert reasons(run_rules.screenshot_is_the_stored_image(stored)) == []


def test_action_cites_a_logged_screenshot() -> None:
    data = {"kind": "computer", "detail": {run_rules.SEEN_KEY: "b" * 64}}
    unseen = run_rules.ImageFacts(ArmAction.TYPE, 4, EP, data)
    (why,) = run_rules.action_cites_a_logged_screenshot(unseen)
    assert why.startswith(f"event #4 ({EP}): action cites screenshot {'b' * 16}... that its")
    seen = attrs.evolve(unseen, shown=lambda sha: sha == "b" * 64)
    assert reasons(run_rules.action_cites_a_logged_screenshot(seen)) == []


# --- the submission check's rules, on one row of trial 0 of TASK -------------------------------

WHERE = "row 0 (a::fake::ok::t0)"
NOTE = trial_params(TASK, 0)["note"]


def snapshot(*notes: str) -> dict[str, Any]:
    rows = [{"id": i + 1, "owner": "p1", "note": n} for i, n in enumerate(notes)]
    return {"readable": True, "tables": {"notes": rows}, "error": None}


def row(task: Any = TASK, **change: Any) -> dict[str, Any]:
    """A sound row of ``task`` (its agent wrote this trial's note and said so), then
    ``change`` applied (a key set to ``...`` is dropped)."""
    doc: dict[str, Any] = {
        "system": "a",
        **trial_fields(task),
        "reported_success": True,
        "pre_snapshot": snapshot(),
        "post_snapshot": snapshot(NOTE),
    }
    if isinstance(task.expected_effect, DiffEffect):
        twin = {"program": "oracle", "pre_snapshot": snapshot(), "post_snapshot": snapshot(NOTE)}
        doc["reference"] = twin
    expected = row_facts(WHERE, doc, task, 0).expected
    assert expected is not None
    doc.update(expected)
    doc.update(change)
    return {k: v for k, v in doc.items() if v is not ...}


def row_reasons(rule: Any, task: Any = TASK, **change: Any) -> list[str]:
    return list(rule(row_facts(WHERE, row(task, **change), task, 0)))


REFERENCE = attrs.evolve(
    TASK, expected_effect=DiffEffect(keys={"notes": ("id",)}, mode="reference", reference="oracle")
)


def test_a_sound_row_passes_every_row_rule() -> None:
    for task in (TASK, REFERENCE):
        facts = row_facts(WHERE, row(task), task, 0)
        assert run_rules.reasons_of(submission_rules.ROW_RULES, facts) == []
        assert facts.expected is not None and facts.expected["outcome"] == "SUCCESS"


def test_params_are_present() -> None:
    assert row_reasons(submission_rules.params_are_present, params=...) == [
        f"{WHERE}: params missing; the trial payload cannot be checked"
    ]
    assert row_reasons(submission_rules.params_are_present) == []


def test_params_carry_the_trial_tag() -> None:
    (why,) = row_reasons(submission_rules.params_carry_the_trial_tag, params={"note": "untagged"})
    assert why.startswith(f"{WHERE}: params carry no trial tag ")
    assert row_reasons(submission_rules.params_carry_the_trial_tag) == []


def test_params_are_what_the_seeds_give() -> None:
    forged = {"note": NOTE, "extra": "x"}
    assert row_reasons(submission_rules.params_are_what_the_seeds_give, params=forged) == [
        f"{WHERE}: params differ from the payload the declared trials/seeds give"
    ]
    assert row_reasons(submission_rules.params_are_what_the_seeds_give) == []


def test_effect_is_the_tasks() -> None:
    wrong = [f"{WHERE}: effect is not the task's declared effect for this trial"]
    assert row_reasons(submission_rules.effect_is_the_tasks, effect_hash="2" * 64) == wrong
    assert row_reasons(submission_rules.effect_is_the_tasks, effect={"x": 1}) == wrong
    assert row_reasons(submission_rules.effect_is_the_tasks) == []


def test_axes_are_the_tasks() -> None:
    assert row_reasons(submission_rules.axes_are_the_tasks, split="test") == [
        f"{WHERE}: split 'test' differs from the task's 'dev'"
    ]
    assert row_reasons(submission_rules.axes_are_the_tasks) == []


def test_twin_reads_need_a_reference_diff() -> None:
    (why,) = row_reasons(submission_rules.twin_reads_need_a_reference_diff, reference={})
    assert why.startswith(f"{WHERE}: carries twin reads (reference), but its effect is not")
    assert row_reasons(submission_rules.twin_reads_need_a_reference_diff) == []


def test_twin_reads_are_the_reference_programs() -> None:
    other = {"program": "other", "pre_snapshot": snapshot(), "post_snapshot": snapshot(NOTE)}
    rule = submission_rules.twin_reads_are_the_reference_programs
    assert row_reasons(rule, REFERENCE, reference=other) == [
        f"{WHERE}: twin reads are of program 'other', not the task's reference program 'oracle'"
    ]
    assert row_reasons(rule, REFERENCE) == []


def test_readings_are_well_formed() -> None:
    rule = submission_rules.readings_are_well_formed
    (why,) = row_reasons(rule, post_snapshot={"readable": "x", "tables": 3})
    assert why.startswith(f"{WHERE}: oracle readings are malformed (")
    not_an_object = "(reference is not an object of the twin's two reads)"
    assert row_reasons(rule, REFERENCE, reference=[1]) == [
        f"{WHERE}: oracle readings are malformed {not_an_object}"
    ]
    assert row_reasons(rule) == []


def test_reference_rows_carry_twin_reads() -> None:
    rule = submission_rules.reference_rows_carry_twin_reads
    (why,) = row_reasons(rule, REFERENCE, reference=...)
    assert why == (
        f"{WHERE}: a reference-mode diff, but the row carries no twin reads (reference): its "
        "expected diff cannot be re-derived"
    )
    assert row_reasons(rule, REFERENCE) == []


def test_unscored_rows_say_why() -> None:
    rule = submission_rules.unscored_rows_say_why
    (why,) = row_reasons(rule, reported_success=None)
    assert why == (
        f"{WHERE}: no agent report and oracle reading to score, and no valid failure_class "
        "(None) saying why"
    )
    assert row_reasons(rule, reported_success=None, failure_class="environment") == []


def test_labels_are_rederived() -> None:
    rule = submission_rules.labels_are_rederived
    assert row_reasons(rule, post_snapshot=snapshot("someone else's note")) == [
        f"{WHERE}: true_state claimed 'CORRECT', re-derived 'WRONG_PERSISTED'",
        f"{WHERE}: outcome claimed 'SUCCESS', re-derived 'SILENT_WRONG_EFFECT'",
        f"{WHERE}: swer_variant claimed None, re-derived 'wrong_write'",
    ]
    assert row_reasons(rule) == []


def documented_rules(doc: str, heading: str) -> set[str]:
    """The rule names in the first column of the tables under ``heading`` in ``doc``."""
    text = ROOT.joinpath("docs", doc).read_text("utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))


TABLES = {
    "run": (run_rules.PLAN_RULES, run_rules.EPISODE_RULES, run_rules.IMAGE_RULES),
    "submission": (submission_rules.ROW_RULES,),
}


@pytest.mark.parametrize("check", sorted(TABLES))
def test_every_rule_is_documented_and_every_documented_rule_exists(check: str) -> None:
    listed = documented_rules("leaderboard.md", f"### The {check} check's rules")
    assert listed == {rule.__name__ for table in TABLES[check] for rule in table}
