"""The model refuses specs it cannot score fairly, and its effect contract hashes stably."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from effectbench.core.codec import converter, from_json, to_json
from effectbench.core.hashing import content_hash
from effectbench.core.model import (
    SPEC_VERSION,
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
    assert content_hash(a) == content_hash(b)
    assert content_hash(from_json(to_json(a), Effect)) == content_hash(a)
    # pinned: a change here means every logged effect_hash changes (a scoring-version matter)
    assert content_hash(a) == PINNED_HASH


def test_effect_content_hash_is_a_deprecated_alias_of_the_hashing_function() -> None:
    a = EFFECT.resolve(trial_params(task(), 0))
    with pytest.warns(DeprecationWarning, match="effectbench.core.hashing.content_hash"):
        assert a.content_hash() == content_hash(a)
    with pytest.warns(DeprecationWarning):
        assert EFFECT.content_hash() == content_hash(EFFECT)


def test_the_hashed_form_is_the_codecs_form() -> None:
    # One JSON form of an effect: what the codec writes is what the hash covers.
    assert EFFECT.plain() == converter.unstructure(EFFECT)
    assert orjson.loads(to_json(EFFECT)) == EFFECT.plain()


def test_content_hash_tells_contracts_apart() -> None:
    base = EFFECT.resolve(trial_params(task(), 0))
    assert content_hash(base) != content_hash(EFFECT.resolve(trial_params(task(), 1)))
    assert content_hash(base) != content_hash(EFFECT)
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
        assert content_hash(other) != content_hash(base), change


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


# --------------------------------------------------------------------------- untrusted task files


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"correct_action_available": "false"}, "'correct_action_available' must be true or false"),
        ({"reversible": 1}, "'reversible' must be true or false"),
        (
            {"oracle": {"isolated_from_agent": "false"}},
            "'isolated_from_agent' must be true or false",
        ),
        ({"oracle": {"tables": "encounters"}}, "'tables' must be a list of table names"),
        ({"substrate": "mobile"}, "substrate 'mobile' is not one of web, desktop"),
        ({"split": None}, "split None is not one of dev, test"),
        ({"goal": None}, "'goal' must be a string"),
        ({"params": {"note": 3}}, "param 'note' must be a string template"),
        ({"initial_state": {"t": [{"a": [1]}]}}, r"initial_state.t\[0\].a must be a JSON scalar"),
        ({"fixture": []}, "fixture must be a JSON object"),
    ],
)
def test_mistyped_task_fields_are_named_never_coerced(over: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as info:
        task(**over)
    assert str(info.value).startswith("task 'mockmed::ok': ")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"expected_count": 1.7}, "'expected_count' must be an integer"),
        ({"expected_count": True}, "'expected_count' must be an integer"),
        ({"count_new_only": "no"}, "'count_new_only' must be true or false"),
        ({"id_field": ["id"]}, "'id_field' must be a string"),
        ({"idempotency_key": ["key"]}, r"'idempotency_key' must be \[column, value\]"),
        ({"selector": None}, "selector must be a JSON object"),
    ],
)
def test_mistyped_effect_clauses_are_rejected(change: dict[str, Any], message: str) -> None:
    effect = converter.unstructure(EFFECT)
    effect["record_written"].update(change)
    with pytest.raises(InvalidSpec, match=message):
        task(expected_effect=effect)


def test_missing_required_task_field_is_named() -> None:
    for name in ("task_id", "goal", "expected_effect", "correct_action_available"):
        d = task_dict()
        del d[name]
        with pytest.raises(InvalidSpec, match=f"'{name}' is missing"):
            converter.structure(d, TaskSpec)


def test_a_task_file_that_is_not_json_is_invalid_spec() -> None:
    with pytest.raises(InvalidSpec, match="not valid JSON"):
        from_json(b'{"task_id": ', TaskSpec)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
TASK_KEYS = [
    *task_dict(),
    "initial_state",
    "solution",
    "fixture",
    "reversible",
    "effect_declared",
    "split",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    over=st.dictionaries(st.sampled_from(TASK_KEYS), json_values, max_size=3),
    drop=st.sets(st.sampled_from(TASK_KEYS), max_size=2),
    whole=json_values,
)
def test_any_json_decodes_to_a_task_or_invalid_spec(
    over: dict[str, Any], drop: set[str], whole: Any
) -> None:
    """Untrusted task JSON: a TaskSpec or an InvalidSpec, never another exception."""
    near_valid = {k: v for k, v in task_dict().items() if k not in drop} | over
    for doc in (near_valid, whole, {"expected_effect": whole}, task_dict(expected_effect=whole)):
        try:
            t = from_json(orjson.dumps(doc), TaskSpec)
        except InvalidSpec:
            continue
        assert from_json(to_json(t), TaskSpec) == t


def test_spec_md_states_the_spec_version_the_code_implements() -> None:
    spec = (Path(__file__).resolve().parents[2] / "SPEC.md").read_text(encoding="utf-8")
    assert f"**Spec version: {SPEC_VERSION}**" in spec.splitlines()[2]
    assert SPEC_VERSION == "1.1.0"
