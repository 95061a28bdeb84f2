"""The model refuses specs it cannot score fairly, and its effect contract hashes stably."""

from __future__ import annotations

from typing import Any

import pytest

from effectbench.codec import converter, from_json, to_json
from effectbench.model import (
    Category,
    Effect,
    FieldEquals,
    InvalidSpec,
    OracleSpec,
    ParamRef,
    RecordWritten,
    TaskSpec,
    trial_params,
    trial_tag,
)

EFFECT = Effect(
    RecordWritten(
        table="encounters",
        selector={"patient_id": "p1", "type": "Triage"},
        idempotency_key=("key", ParamRef("record_key")),
    ),
    (FieldEquals("note", ParamRef("note")),),
)
GOAL = "Record a Triage encounter for the referred patient with the clinical note, then save it."


def task_dict(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "task_id": "mockmed::ok",
        "title": "clean save",
        "substrate": "web",
        "category": "control",
        "goal": GOAL,
        "expected_effect": converter.unstructure(EFFECT),
        "oracle": {"channel": "snapshot"},
        "correct_action_available": True,
        "params": {"note": "triage note {tag}", "record_key": "key-{tag}"},
    }
    d.update(over)
    return d


def task(**over: Any) -> TaskSpec:
    return converter.structure(task_dict(**over), TaskSpec)


def test_a_valid_task_round_trips_through_json() -> None:
    t = task()
    assert t.category is Category.CONTROL
    assert from_json(to_json(t), TaskSpec) == t


def test_task_without_category_is_rejected() -> None:
    d = task_dict()
    del d["category"]
    with pytest.raises(InvalidSpec, match="category None is not one of .*C1_partial_save"):
        converter.structure(d, TaskSpec)


def test_unknown_category_is_rejected() -> None:
    with pytest.raises(InvalidSpec, match="'C9_bogus' is not one of"):
        task(category="C9_bogus")
    with pytest.raises(InvalidSpec, match="every task declares one"):
        TaskSpec(**{**_ctor_kwargs(), "category": None})


def _ctor_kwargs() -> dict[str, Any]:
    t = task()
    names = ("task_id", "title", "substrate", "goal", "expected_effect", "oracle", "params")
    return {a: getattr(t, a) for a in names} | {"correct_action_available": True}


@pytest.mark.parametrize(
    "goal",
    [
        "1. Open the patient chart\n2. Add a Triage encounter\n3. Save",
        "1) open the chart\n2) save",
        "Step 1: open the chart\nStep 2: click save",
    ],
)
def test_goal_written_as_numbered_steps_is_rejected(goal: str) -> None:
    with pytest.raises(InvalidSpec, match="numbered step list; state the intent"):
        task(goal=goal)


@pytest.mark.parametrize(
    "goal", [GOAL, "Record 2 doses for patient 1.", "Save the note.\n1. That is all."]
)
def test_intent_goals_with_numbers_are_accepted(goal: str) -> None:
    assert task(goal=goal).goal == goal


def test_empty_goal_is_rejected() -> None:
    with pytest.raises(InvalidSpec, match="goal is empty"):
        task(goal="   ")


def test_field_equals_without_a_field_is_rejected() -> None:
    with pytest.raises(InvalidSpec, match="field_equals needs a field name"):
        FieldEquals("", "x")
    effect = converter.unstructure(EFFECT)
    effect["field_equals"] = [{"expected": "x"}]
    with pytest.raises(InvalidSpec, match="field_equals needs a field name"):
        task(expected_effect=effect)


def test_audited_oracle_without_trial_unique_payload_is_rejected() -> None:
    oracle = {"adversarially_audited": True, "trial_unique_payload": False}
    with pytest.raises(InvalidSpec, match="adversarially audited must use a trial-unique payload"):
        task(oracle=oracle)


def test_trial_unique_claim_needs_a_tag_param() -> None:
    with pytest.raises(InvalidSpec, match=r"no run param uses \{tag\}"):
        task(params={"note": "a fixed note", "record_key": "k"})
    t = task(params={}, oracle={"trial_unique_payload": False})
    assert not t.oracle.trial_unique_payload


def test_empty_selector_and_negative_count_are_rejected() -> None:
    with pytest.raises(InvalidSpec, match="selector is empty"):
        RecordWritten(table="t", selector={})
    with pytest.raises(InvalidSpec, match="expected_count must be >= 0"):
        RecordWritten(table="t", selector={"a": 1}, expected_count=-1)


def test_a_list_where_a_value_belongs_is_rejected() -> None:
    effect = converter.unstructure(EFFECT)
    effect["record_written"]["selector"]["type"] = ["Triage"]
    with pytest.raises(InvalidSpec, match="a value must be a JSON scalar"):
        task(expected_effect=effect)


def test_oracle_spec_defaults_never_claim_an_audit() -> None:
    assert OracleSpec().adversarially_audited is False


def test_trial_tag_matches_the_anchor() -> None:
    assert trial_tag("mockmed::ok", 0) == "43b6666f11c2"
    assert trial_params(task(), 0) == {
        "note": "triage note 43b6666f11c2",
        "record_key": "key-43b6666f11c2",
    }


def test_resolve_replaces_every_param_ref() -> None:
    assert not EFFECT.is_resolved
    r = EFFECT.resolve(trial_params(task(), 0))
    assert r.is_resolved
    assert r.record_written.idempotency_key == ("key", "key-43b6666f11c2")
    assert r.field_equals == (FieldEquals("note", "triage note 43b6666f11c2"),)
    assert r.record_written.selector == {"patient_id": "p1", "type": "Triage"}
    assert r.resolve({}) == r  # resolving a resolved effect changes nothing


def test_resolve_with_an_undefined_param_is_rejected() -> None:
    with pytest.raises(InvalidSpec, match="run param 'record_key' which the task does not define"):
        EFFECT.resolve({"note": "x"})


def test_content_hash_is_stable_and_order_independent() -> None:
    a = Effect(RecordWritten(table="t", selector={"a": 1, "b": "x"}), (FieldEquals("n", "v"),))
    b = Effect(RecordWritten(table="t", selector={"b": "x", "a": 1}), [FieldEquals("n", "v")])
    assert a.content_hash() == b.content_hash()
    assert from_json(to_json(a), Effect).content_hash() == a.content_hash()
    # pinned: a change here means every logged effect_hash changes (a scoring-version matter)
    assert a.content_hash() == PINNED_HASH


def test_content_hash_tells_contracts_apart() -> None:
    base = EFFECT.resolve(trial_params(task(), 0))
    assert base.content_hash() != EFFECT.resolve(trial_params(task(), 1)).content_hash()
    assert base.content_hash() != EFFECT.content_hash()
    for change in (
        {"expected_count": 2},
        {"count_new_only": True},
        {"forbid_collateral_loss": False},
        {"forbid_stray_writes": True},
        {"id_field": "key"},
        {"selector": {"patient_id": "p1", "type": 1}},
    ):
        other = Effect(
            RecordWritten(**{**_rw_kwargs(base.record_written), **change}), base.field_equals
        )
        assert other.content_hash() != base.content_hash(), change


def _rw_kwargs(rw: RecordWritten) -> dict[str, Any]:
    return {
        "table": rw.table,
        "selector": rw.selector,
        "expected_count": rw.expected_count,
        "idempotency_key": rw.idempotency_key,
        "forbid_collateral_loss": rw.forbid_collateral_loss,
        "forbid_stray_writes": rw.forbid_stray_writes,
        "count_new_only": rw.count_new_only,
        "id_field": rw.id_field,
    }


PINNED_HASH = "a95df93d67d12b6367478d6ec21dac0ee508fb5a57c9f3d92f5c2e37885f5149"
