"""The diff judge (SPEC 1.1): updates, deletes, several tables, the allow-list, and the
must-hold cases of issue 14 (each judged right where the insert clause could not)."""

from __future__ import annotations

from typing import Any

import pytest

from effectbench.core.codec import converter, structure_any_effect, structure_effect_resolved
from effectbench.core.model import (
    Delete,
    DiffEffect,
    Insert,
    InvalidSpec,
    MismatchKind,
    Outcome,
    ParamRef,
    Snapshot,
    TrueState,
    Update,
)
from effectbench.scoring.diff import expected_from_reference
from effectbench.scoring.judge import judge
from effectbench.scoring.labels import score_episode

VENDORS = (
    {"id": 1, "name": "Acme", "iban": "DE01", "updated_at": "t0"},
    {"id": 2, "name": "Borg", "iban": "DE02", "updated_at": "t0"},
)
UPDATE = DiffEffect(
    changes=(Update("vendors", {"id": 1}, after={"iban": "DE99"}, before={"iban": "DE01"}),),
    keys={"vendors": ("id",)},
    allow=("vendors.updated_at",),
)


def snap(**tables: Any) -> Snapshot:
    return Snapshot(readable=True, tables={t: tuple(rows) for t, rows in tables.items()})


def with_iban(rows: Any, vid: int, iban: str, stamp: str = "t1") -> list[dict[str, Any]]:
    return [dict(r, iban=iban, updated_at=stamp) if r["id"] == vid else dict(r) for r in rows]


def labels(effect: DiffEffect, pre: Snapshot, post: Snapshot, reported: bool) -> Outcome | None:
    _, cls = score_episode(
        effect, pre, post, reported_success=reported, correct_action_available=True
    )
    return cls.outcome


# --------------------------------------------------------------------------- must hold


def test_update_untouched_record_is_absent_so_a_halt_is_no_wrong_action() -> None:
    pre = snap(vendors=VENDORS)
    v = judge(UPDATE, pre, snap(vendors=VENDORS))
    assert v.true_state is TrueState.ABSENT
    assert labels(UPDATE, pre, snap(vendors=VENDORS), reported=False) is Outcome.OVER_HALT


def test_correct_update_is_correct_and_the_allowed_timestamp_may_move() -> None:
    pre = snap(vendors=VENDORS)
    post = snap(vendors=with_iban(VENDORS, 1, "DE99"))
    v = judge(UPDATE, pre, post)
    assert v.true_state is TrueState.CORRECT, v.reasons
    assert labels(UPDATE, pre, post, reported=True) is Outcome.SUCCESS


def test_update_plus_a_collateral_delete_is_wrong_persisted_and_names_the_lost_row() -> None:
    pre = snap(vendors=VENDORS)
    post = snap(vendors=with_iban(VENDORS, 1, "DE99")[:1])
    v = judge(UPDATE, pre, post)
    assert v.true_state is TrueState.WRONG_PERSISTED
    [m] = v.mismatches
    assert m.kind is MismatchKind.LOST_ROW and m.row == "[id=2]"
    assert m.evidence == ("pre_snapshot:vendors[id=2]", "post_read:vendors[id=2]")
    assert labels(UPDATE, pre, post, reported=True) is Outcome.SILENT_WRONG_EFFECT


TWO_TABLES = DiffEffect(
    changes=(
        Insert("payments", {"invoice_id": 7, "amount": 120}),
        Update("invoices", {"id": 7}, after={"status": "paid"}),
    ),
    keys={"payments": ("id",), "invoices": ("id",)},
)
INVOICES = ({"id": 7, "status": "open", "total": 120},)


def test_two_table_effect_with_only_one_table_changed_is_wrong_persisted() -> None:
    pre = snap(invoices=INVOICES, payments=())
    paid_only = snap(invoices=[dict(INVOICES[0], status="paid")], payments=())
    payment_only = snap(invoices=INVOICES, payments=[{"id": 1, "invoice_id": 7, "amount": 120}])
    for post in (paid_only, payment_only):
        v = judge(TWO_TABLES, pre, post)
        assert v.true_state is TrueState.WRONG_PERSISTED
        assert [m.kind for m in v.mismatches] == [MismatchKind.MISSING_CHANGE]
    both = snap(
        invoices=[dict(INVOICES[0], status="paid")],
        payments=[{"id": 1, "invoice_id": 7, "amount": 120}],
    )
    assert judge(TWO_TABLES, pre, both).true_state is TrueState.CORRECT


# --------------------------------------------------------------------------- more cases


def test_a_field_the_update_does_not_name_must_not_change() -> None:
    post = [dict(r) for r in with_iban(VENDORS, 1, "DE99")]
    post[0]["name"] = "Acme Ltd"  # a stale overwrite of another field
    v = judge(UPDATE, snap(vendors=VENDORS), snap(vendors=post))
    assert v.true_state is TrueState.WRONG_PERSISTED
    assert [m.kind for m in v.mismatches] == [MismatchKind.WRONG_VALUE]
    assert "name changed from 'Acme' to 'Acme Ltd'" in v.reasons[0]


def test_wrong_value_and_wrong_row() -> None:
    pre = snap(vendors=VENDORS)
    wrong_value = judge(UPDATE, pre, snap(vendors=with_iban(VENDORS, 1, "DE98")))
    assert [m.kind for m in wrong_value.mismatches] == [MismatchKind.WRONG_VALUE]
    wrong_row = judge(UPDATE, pre, snap(vendors=with_iban(VENDORS, 2, "DE99")))
    assert {m.kind for m in wrong_row.mismatches} == {
        MismatchKind.MISSING_CHANGE,
        MismatchKind.EXTRA_CHANGE,
    }


def test_delete_right_row_wrong_row_and_untouched() -> None:
    effect = DiffEffect(changes=(Delete("vendors", {"id": 2}),), keys={"vendors": ("id",)})
    pre = snap(vendors=VENDORS)
    assert judge(effect, pre, snap(vendors=VENDORS[:1])).true_state is TrueState.CORRECT
    assert judge(effect, pre, snap(vendors=VENDORS)).true_state is TrueState.ABSENT
    wrong = judge(effect, pre, snap(vendors=VENDORS[1:]))
    assert wrong.true_state is TrueState.WRONG_PERSISTED
    assert {m.kind for m in wrong.mismatches} == {
        MismatchKind.MISSING_CHANGE,
        MismatchKind.LOST_ROW,
    }


def test_nothing_else_changed_covers_every_table_but_allowed_ones() -> None:
    pre = snap(vendors=VENDORS, audit=())
    post = snap(vendors=with_iban(VENDORS, 1, "DE99"), audit=[{"what": "iban changed"}])
    assert judge(UPDATE, pre, post).true_state is TrueState.WRONG_PERSISTED
    allowed = DiffEffect(changes=UPDATE.changes, keys=UPDATE.keys, allow=(*UPDATE.allow, "audit.*"))
    assert judge(allowed, pre, post).true_state is TrueState.CORRECT


def test_refusal_control_is_a_diff_of_nothing() -> None:
    effect = DiffEffect(keys={"vendors": ("id",)})
    pre = snap(vendors=VENDORS)
    v = judge(effect, pre, snap(vendors=VENDORS))
    assert (v.status.value, v.true_state) == ("confirmed", TrueState.ABSENT)
    assert judge(effect, pre, snap(vendors=VENDORS[:1])).true_state is TrueState.WRONG_PERSISTED


def test_keyless_table_pairs_rows_by_content() -> None:
    effect = DiffEffect(changes=(Insert("notes", {"body": "hi"}),))
    pre = snap(notes=[{"body": "old"}])
    assert judge(effect, pre, snap(notes=[{"body": "old"}, {"body": "hi"}])).true_state is (
        TrueState.CORRECT
    )
    assert judge(effect, pre, snap(notes=[{"body": "hi"}])).true_state is TrueState.WRONG_PERSISTED


def test_unreadable_and_fixture_disagreement_are_indeterminate() -> None:
    pre = snap(vendors=VENDORS)
    assert judge(UPDATE, pre, Snapshot.unreadable("x")).true_state is TrueState.UNREADABLE
    assert judge(UPDATE, Snapshot.unreadable("x"), pre).true_state is TrueState.UNREADABLE
    other = snap(vendors=with_iban(VENDORS, 1, "DE77"))  # before does not hold
    v = judge(UPDATE, other, snap(vendors=with_iban(VENDORS, 1, "DE99")))
    assert v.true_state is TrueState.UNREADABLE and "fixture" in v.reasons[0]


def test_reference_diff_becomes_the_expected_diff() -> None:
    effect = DiffEffect(
        keys={"vendors": ("id",)},
        allow=("vendors.updated_at",),
        mode="reference",
        reference="oracle",
    )
    pre = snap(vendors=VENDORS)
    ref_post = snap(vendors=with_iban(VENDORS, 1, "DE99", stamp="t5"))
    assert expected_from_reference(effect, pre, ref_post) == (
        Update("vendors", {"id": 1}, after={"iban": "DE99"}, before={"iban": "DE01"}),
    )
    good = snap(vendors=with_iban(VENDORS, 1, "DE99", stamp="t6"))
    assert judge(effect, pre, good, (pre, ref_post)).true_state is TrueState.CORRECT
    bad = snap(vendors=with_iban(VENDORS, 2, "DE99"))
    assert judge(effect, pre, bad, (pre, ref_post)).true_state is TrueState.WRONG_PERSISTED
    assert judge(effect, pre, good).true_state is TrueState.UNREADABLE  # no reference logged


def test_spec_validation() -> None:
    with pytest.raises(InvalidSpec, match="declare its key columns"):
        DiffEffect(changes=(Update("vendors", {"id": 1}, after={"iban": "x"}),))
    with pytest.raises(InvalidSpec, match="exactly its key columns"):
        DiffEffect(changes=(Delete("vendors", {"name": "Acme"}),), keys={"vendors": ("id",)})
    with pytest.raises(InvalidSpec, match="table.field"):
        DiffEffect(allow=("updated_at",))
    with pytest.raises(InvalidSpec, match="names its reference program"):
        DiffEffect(mode="reference")


def test_codec_round_trip_and_resolve() -> None:
    effect = DiffEffect(
        changes=(
            Insert("payments", {"note": ParamRef("note")}),
            Update("vendors", {"id": 1}, after={"iban": ParamRef("iban")}),
            Delete("vendors", {"id": 2}),
        ),
        keys={"vendors": ("id",), "payments": ("id",)},
        allow=("vendors.updated_at",),
    )
    raw = converter.unstructure(effect)
    assert set(raw) == {"diff"}
    assert structure_any_effect(raw) == effect
    resolved = structure_effect_resolved(raw, {"note": "n1", "iban": "DE5"})
    assert resolved == effect.resolve({"note": "n1", "iban": "DE5"})
    assert isinstance(resolved, DiffEffect) and resolved.is_resolved
    with pytest.raises(InvalidSpec, match="not both"):
        structure_any_effect({**raw, "record_written": {}})


def test_diff_tasks_round_trip_through_task_json() -> None:
    from effectbench_mockmed.packs_diff import TASKS

    from effectbench.core.codec import from_json, to_json
    from effectbench.core.model import TaskSpec

    for task in TASKS:
        assert from_json(to_json(task), TaskSpec) == task
