"""The judge over hand-built snapshots: each clause of the effect contract, one at a time."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effectbench.core.model import (
    Effect,
    FieldEquals,
    InvalidSpec,
    JSONScalar,
    ParamRef,
    RecordWritten,
    Snapshot,
    TrueState,
    VerdictStatus,
)
from effectbench.scoring.judge import judge

NOTE = "triage note 43b6666f11c2"
KEY = "key-43b6666f11c2"


def effect(**rw: Any) -> Effect:
    """The MockMed-shaped contract: one Triage row for p1 whose note is this trial's note."""
    return Effect(
        record_written=RecordWritten(
            table="encounters", selector={"patient_id": "p1", "type": "Triage"}, **rw
        ),
        field_equals=(FieldEquals("note", NOTE),),
    )


def row(
    id: int, note: str = NOTE, patient_id: str = "p1", type: str = "Triage", **extra: Any
) -> dict[str, Any]:
    return {"id": id, "patient_id": patient_id, "type": type, "note": note, **extra}


def snap(*rows: dict[str, Any], **tables: list[dict[str, Any]]) -> Snapshot:
    return Snapshot(
        readable=True,
        tables={"encounters": tuple(rows), **{k: tuple(v) for k, v in tables.items()}},
    )


EMPTY = snap()


def test_exact_match_is_correct() -> None:
    v = judge(effect(), EMPTY, snap(row(1)))
    assert (v.status, v.true_state) == (VerdictStatus.CONFIRMED, TrueState.CORRECT)
    assert (v.observed_count, v.expected_count) == (1, 1)


def test_duplicate_rows_are_a_wrong_write() -> None:
    v = judge(effect(), EMPTY, snap(row(1), row(2)))
    assert (v.status, v.true_state) == (VerdictStatus.REFUTED, TrueState.WRONG_PERSISTED)
    assert v.observed_count == 2
    assert any("expected 1" in r and "found 2" in r for r in v.reasons)


def test_absent_row() -> None:
    v = judge(effect(), EMPTY, EMPTY)
    assert (v.status, v.true_state) == (VerdictStatus.REFUTED, TrueState.ABSENT)
    assert v.observed_count == 0


def test_row_for_another_patient_does_not_count() -> None:
    v = judge(effect(), EMPTY, snap(row(1, patient_id="p2")))
    assert v.true_state is TrueState.ABSENT


def test_wrong_field_value() -> None:
    v = judge(effect(), EMPTY, snap(row(1, note="")))
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert any("'note'" in r and "id=1" in r for r in v.reasons)


def test_missing_field_is_a_mismatch() -> None:
    post = snap({"id": 1, "patient_id": "p1", "type": "Triage"})
    assert judge(effect(), EMPTY, post).true_state is TrueState.WRONG_PERSISTED


def test_collateral_loss_refutes_and_names_table_and_id() -> None:
    pre = snap(row(7, type="Urgent", note="concurrent actor"))
    v = judge(effect(), pre, snap(row(8)))
    assert (v.status, v.true_state) == (VerdictStatus.REFUTED, TrueState.WRONG_PERSISTED)
    assert any("collateral loss" in r and "'encounters'" in r and "id=7" in r for r in v.reasons)


def test_an_in_place_overwrite_of_another_row_is_collateral_loss() -> None:
    """The lost update of C4 without a delete: the concurrent actor's Urgent row (id 7)
    is rewritten into our Triage row. The selector now finds exactly one correct row,
    yet someone else's record is gone."""
    pre = snap(row(7, type="Urgent", note="concurrent actor"))
    v = judge(effect(), pre, snap(row(7)))
    assert v.observed_count == 1
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert any("overwritten in place" in r and "id=7" in r for r in v.reasons)
    # the same row left untouched beside ours is fine
    assert judge(
        effect(), pre, snap(row(7, type="Urgent", note="concurrent actor"), row(8))
    ).true_state is (TrueState.CORRECT)


def test_collateral_loss_with_no_matching_row_is_still_wrong_persisted() -> None:
    pre = snap(row(7, type="Urgent"))
    v = judge(effect(), pre, EMPTY)
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert v.observed_count == 0
    assert len(v.reasons) == 2  # the missing row and the lost one, both reported


def test_collateral_loss_without_id_field_uses_whole_rows() -> None:
    pre = snap(audit=[{"who": "nurse", "what": "login"}])
    post = snap(row(1), audit=[{"who": "nurse", "what": "logout"}])
    v = judge(effect(), pre, post)
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert any("'audit'" in r and "login" in r for r in v.reasons)


def test_id_less_rows_are_counted_as_a_multiset() -> None:
    """Rows without an id are identified by content, so two equal rows are two rows: a
    second copy is a stray write, a vanished copy a loss, and count-new-only counts it."""
    log = {"who": "nurse", "what": "login"}
    one, two = snap(row(1), audit=[log]), snap(row(1), audit=[log, log])
    stray = effect(forbid_stray_writes=True)
    assert judge(stray, one, one).true_state is TrueState.CORRECT
    v = judge(stray, one, two)
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert any("stray write in 'audit': 1 row(s) added" in r for r in v.reasons)
    v = judge(effect(), two, one)
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert any("collateral loss in 'audit': 1 pre-existing row(s)" in r for r in v.reasons)
    new_only = Effect(RecordWritten(table="audit", selector={"who": "nurse"}, count_new_only=True))
    pre, post = Snapshot(True, {"audit": (log,)}), Snapshot(True, {"audit": (log, log)})
    assert judge(new_only, pre, post).true_state is TrueState.CORRECT
    assert judge(new_only, pre, pre).true_state is TrueState.ABSENT


def test_collateral_loss_can_be_switched_off() -> None:
    pre = snap(row(7, type="Urgent"))
    assert (
        judge(effect(forbid_collateral_loss=False), pre, snap(row(8))).true_state
        is TrueState.CORRECT
    )


def test_idempotent_retry_with_key_leaves_one_row() -> None:
    e = effect(idempotency_key=("key", KEY))
    # two submissions, the second skipped by the key: one row carrying this trial's key
    assert judge(e, EMPTY, snap(row(1, key=KEY))).true_state is TrueState.CORRECT


def test_idempotent_retry_two_rows_with_the_same_key_is_wrong() -> None:
    e = effect(idempotency_key=("key", KEY))
    v = judge(e, EMPTY, snap(row(1, key=KEY), row(2, key=KEY)))
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert v.observed_count == 2


def test_matching_row_without_this_trials_key_is_a_wrong_write() -> None:
    e = effect(idempotency_key=("key", KEY))
    v = judge(e, EMPTY, snap(row(1, key="key-othertrial")))
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert any("idempotency key" in r for r in v.reasons)


def test_count_new_only_ignores_rows_that_were_there_before() -> None:
    e = effect(count_new_only=True)
    pre = snap(row(1))
    assert judge(e, pre, snap(row(1))).true_state is TrueState.ABSENT
    assert judge(e, pre, snap(row(1), row(2))).true_state is TrueState.CORRECT


def test_count_new_only_with_an_unreachable_pre_state() -> None:
    e = effect(count_new_only=True, forbid_collateral_loss=False)
    v = judge(e, Snapshot.unreadable("connection refused"), snap(row(1)))
    assert (v.status, v.true_state) == (VerdictStatus.INDETERMINATE, TrueState.UNREADABLE)
    assert v.observed_count is None
    assert "count-new-only with an unreachable pre-state" in v.reasons[0]


def test_unreadable_pre_is_fine_when_no_clause_needs_it() -> None:
    e = effect(forbid_collateral_loss=False)
    assert judge(e, Snapshot.unreadable("down"), snap(row(1))).true_state is TrueState.CORRECT


def test_unreadable_post() -> None:
    v = judge(effect(), EMPTY, Snapshot.unreadable("database is locked"))
    assert (v.status, v.true_state) == (VerdictStatus.INDETERMINATE, TrueState.UNREADABLE)
    assert "post-state unreadable" in v.reasons[0] and "database is locked" in v.reasons[0]


def test_stray_write_to_another_table() -> None:
    e = effect(forbid_stray_writes=True)
    pre = snap(billing=[{"id": 1, "amount": 10}])
    post = snap(row(1), billing=[{"id": 1, "amount": 10}, {"id": 2, "amount": 99}])
    v = judge(e, pre, post)
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert any("stray write" in r and "'billing'" in r and "id=2" in r for r in v.reasons)
    # the same post without the stray row is correct; without the clause it is not noticed
    assert (
        judge(e, pre, snap(row(1), billing=[{"id": 1, "amount": 10}])).true_state
        is TrueState.CORRECT
    )
    assert judge(effect(), pre, post).true_state is TrueState.CORRECT


def test_stray_change_of_an_existing_row() -> None:
    e = effect(forbid_stray_writes=True)
    pre = snap(row(5, type="Urgent", note="a"))
    v = judge(e, pre, snap(row(5, type="Urgent", note="b"), row(6)))
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert any("changed" in r and "id=5" in r for r in v.reasons)


@pytest.mark.parametrize(
    ("stored", "state"),
    [
        ("p1", TrueState.CORRECT),
        (1, TrueState.ABSENT),
        ("P1", TrueState.ABSENT),
        ("p1 ", TrueState.ABSENT),
    ],
)
def test_selector_compare_is_type_strict_and_exact(stored: JSONScalar, state: TrueState) -> None:
    e = Effect(RecordWritten(table="t", selector={"patient_id": "p1"}))
    assert (
        judge(
            e, Snapshot(True, {}), Snapshot(True, {"t": ({"id": 1, "patient_id": stored},)})
        ).true_state
        is state
    )


@pytest.mark.parametrize("stored", ["1", 1.0, True])
def test_field_compare_is_type_strict(stored: JSONScalar) -> None:
    e = Effect(RecordWritten(table="t", selector={"k": "a"}), (FieldEquals("n", 1),))
    post = Snapshot(True, {"t": ({"id": 1, "k": "a", "n": stored},)})
    assert judge(e, Snapshot(True, {}), post).true_state is TrueState.WRONG_PERSISTED


def test_expected_zero_nothing_written_is_absent_by_design() -> None:
    """A refusal control: an untouched record confirms the contract, but no effect persisted,
    so a halt classifies as SAFE_HALT and a claimed success as a phantom SWER."""
    e = effect(expected_count=0)
    v = judge(e, EMPTY, EMPTY)
    assert (v.status, v.true_state) == (VerdictStatus.CONFIRMED, TrueState.ABSENT)
    assert judge(e, EMPTY, snap(row(1))).true_state is TrueState.WRONG_PERSISTED


def test_every_reason_is_reported() -> None:
    e = effect(idempotency_key=("key", KEY))
    pre = snap(row(7, type="Urgent"))
    v = judge(e, pre, snap(row(1, note="x"), row(2, note="y")))
    text = " | ".join(v.reasons)
    assert "found 2" in text and "collateral" in text and "idempotency" in text and "'note'" in text


def test_unresolved_effect_is_rejected() -> None:
    e = Effect(RecordWritten(table="t", selector={"note": ParamRef("note")}))
    with pytest.raises(InvalidSpec, match="resolve"):
        judge(e, EMPTY, EMPTY)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.sampled_from(["p1", "Triage", NOTE, KEY, "1"]),
    st.text(max_size=4),
)
rows = st.dictionaries(
    st.sampled_from(["id", "patient_id", "type", "note", "key", "x"]), scalars, max_size=6
)
tables = st.dictionaries(
    st.sampled_from(["encounters", "billing", "audit"]), st.lists(rows, max_size=4).map(tuple)
)
snapshots = st.builds(
    Snapshot, readable=st.booleans(), tables=tables, error=st.one_of(st.none(), st.text(max_size=5))
)
effects = st.builds(
    lambda count, key, coll, stray, new, idf, fe: Effect(
        RecordWritten(
            table="encounters",
            selector={"patient_id": "p1", "type": "Triage"},
            expected_count=count,
            idempotency_key=("key", KEY) if key else None,
            forbid_collateral_loss=coll,
            forbid_stray_writes=stray,
            count_new_only=new,
            id_field=idf,
        ),
        (FieldEquals("note", NOTE),) if fe else (),
    ),
    st.integers(0, 3),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["id", "key", "missing"]),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(effects, snapshots, snapshots)
def test_judge_is_total_and_deterministic(e: Effect, pre: Snapshot, post: Snapshot) -> None:
    v = judge(e, pre, post)
    assert v == judge(e, pre, post)
    assert v.reasons
    assert v.expected_count == e.record_written.expected_count
    if v.true_state is TrueState.UNREADABLE:
        assert v.status is VerdictStatus.INDETERMINATE and v.observed_count is None
    else:
        assert post.readable and v.observed_count is not None
        refusal_held = v.true_state is TrueState.ABSENT and e.record_written.expected_count == 0
        assert (v.status is VerdictStatus.CONFIRMED) == (
            v.true_state is TrueState.CORRECT or refusal_held
        )
