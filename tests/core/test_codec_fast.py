"""The rescore fast decoders give exactly what the cattrs converter path gives: the same
value for every input it accepts, the same exception (type and message) for any other."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from effectbench.core.codec import converter, structure_effect_resolved, structure_snapshot
from effectbench.core.model import Effect, Snapshot

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.sampled_from(["", "p1", "Triage", "note", "id"]),
)
params_st: st.SearchStrategy[Any] = st.one_of(
    st.dictionaries(st.sampled_from(["note", "key", "x"]), scalars, max_size=3),
    st.just([]),
    st.none(),
)
param_ref = st.builds(lambda n: {"param": n}, st.sampled_from(["note", "key", "missing", 3]))
value = st.one_of(scalars, param_ref, st.just({"param": "note", "extra": 1}), st.just([1]))
json_any = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=2) | st.dictionaries(st.text(max_size=3), c, max_size=2),
    max_leaves=4,
)


def _maybe(strategy: Any) -> Any:
    return st.one_of(strategy, json_any)


record_written = st.fixed_dictionaries(
    {
        "table": _maybe(st.sampled_from(["encounters", "notes"])),
        "selector": _maybe(
            st.dictionaries(st.sampled_from(["patient_id", "type"]), value, max_size=2)
        ),
    },
    optional={
        "expected_count": _maybe(st.integers(-1, 3)),
        "idempotency_key": st.one_of(
            st.none(), st.tuples(st.sampled_from(["key", 1]), value).map(list), st.just(["key"])
        ),
        "forbid_collateral_loss": _maybe(st.booleans()),
        "forbid_stray_writes": _maybe(st.booleans()),
        "count_new_only": _maybe(st.booleans()),
        "id_field": _maybe(st.sampled_from(["id", "key"])),
        "junk": json_any,
    },
)
field_equals = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"expected": value}, optional={"field": _maybe(st.sampled_from(["note", ""]))}
        ),
        json_any,
    ),
    max_size=2,
)
effect_dict = st.one_of(
    st.fixed_dictionaries(
        {"record_written": record_written}, optional={"field_equals": field_equals}
    ),
    json_any,
)


def _outcome(fn: Any) -> tuple[str, Any]:
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - comparing exactly what each path raises
        return (type(exc).__name__, str(exc))


@settings(max_examples=600, deadline=None)
@given(effect_dict, params_st)
def test_effect_fast_path_equals_converter_then_resolve(d: Any, params: Any) -> None:
    slow = _outcome(lambda: converter.structure(d, Effect).resolve(params))
    fast = _outcome(lambda: structure_effect_resolved(d, params))
    assert fast == slow
    if slow[0] == "ok":  # same clause order too (messages iterate the selector)
        assert list(fast[1].record_written.selector) == list(slow[1].record_written.selector)


def test_effect_fast_path_resolves_params() -> None:
    d = {
        "record_written": {"table": "t", "selector": {"b": 1, "a": {"param": "x"}}},
        "field_equals": [{"field": "note", "expected": {"param": "x"}}],
    }
    eff = structure_effect_resolved(d, {"x": "v"})
    assert eff == converter.structure(d, Effect).resolve({"x": "v"})
    assert eff.is_resolved and list(eff.record_written.selector) == ["a", "b"]


snapshot_dict = st.one_of(
    st.fixed_dictionaries(
        {"readable": json_any},
        optional={
            "tables": st.one_of(
                st.dictionaries(
                    st.sampled_from(["encounters", "x"]),
                    st.lists(st.dictionaries(st.sampled_from(["id", "note"]), scalars), max_size=2),
                    max_size=2,
                ),
                json_any,
            ),
            "error": json_any,
        },
    ),
    json_any,
)


@settings(max_examples=300, deadline=None)
@given(snapshot_dict)
def test_snapshot_fast_path_equals_converter(d: Any) -> None:
    assert _outcome(lambda: structure_snapshot(d)) == _outcome(
        lambda: converter.structure(d, Snapshot)
    )
