"""The one cattrs converter for every model type, with orjson for bytes.

A ParamRef is written as ``{"param": NAME}`` so a task file stays readable JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import cattrs
import orjson

from effectbench.model import (
    Effect,
    FieldEquals,
    InvalidSpec,
    ParamRef,
    RecordWritten,
    Snapshot,
    TaskSpec,
    Value,
)

T = TypeVar("T")


def _unstructure_value(v: Any) -> Any:
    if isinstance(v, ParamRef):
        return {"param": v.name}
    return v


def _structure_value(v: Any, _: Any) -> Value:
    if isinstance(v, Mapping):
        if set(v) == {"param"} and isinstance(v["param"], str):
            return ParamRef(v["param"])
        raise InvalidSpec(f"a value must be a JSON scalar or {{\"param\": NAME}}, got {v!r}")
    if isinstance(v, (list, tuple)):
        raise InvalidSpec(f"a value must be a JSON scalar or {{\"param\": NAME}}, got a list {v!r}")
    return v  # type: ignore[no-any-return]


def _unstructure_values(m: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _unstructure_value(v) for k, v in m.items()}


def _make_converter() -> cattrs.Converter:
    c = cattrs.Converter()
    c.register_unstructure_hook(ParamRef, _unstructure_value)
    c.register_structure_hook(ParamRef, lambda v, t: _structure_value(v, t))

    def unstructure_rw(rw: RecordWritten) -> dict[str, Any]:
        key = rw.idempotency_key
        return {
            "table": rw.table,
            "selector": _unstructure_values(rw.selector),
            "expected_count": rw.expected_count,
            "idempotency_key": None if key is None else [key[0], _unstructure_value(key[1])],
            "forbid_collateral_loss": rw.forbid_collateral_loss,
            "forbid_stray_writes": rw.forbid_stray_writes,
            "count_new_only": rw.count_new_only,
            "id_field": rw.id_field,
        }

    def structure_rw(d: Mapping[str, Any], _: Any) -> RecordWritten:
        key = d.get("idempotency_key")
        return RecordWritten(
            table=d["table"],
            selector={k: _structure_value(v, None) for k, v in d["selector"].items()},
            expected_count=int(d.get("expected_count", 1)),
            idempotency_key=None if key is None else (str(key[0]), _structure_value(key[1], None)),
            forbid_collateral_loss=bool(d.get("forbid_collateral_loss", True)),
            forbid_stray_writes=bool(d.get("forbid_stray_writes", False)),
            count_new_only=bool(d.get("count_new_only", False)),
            id_field=d.get("id_field", "id"),
        )

    c.register_unstructure_hook(RecordWritten, unstructure_rw)
    c.register_structure_hook(RecordWritten, structure_rw)
    c.register_unstructure_hook(
        FieldEquals, lambda f: {"field": f.field, "expected": _unstructure_value(f.expected)}
    )
    c.register_structure_hook(
        FieldEquals, lambda d, _: FieldEquals(field=d.get("field", ""), expected=_structure_value(d["expected"], None))
    )

    def structure_effect(d: Mapping[str, Any], _: Any) -> Effect:
        # Explicit, so an InvalidSpec from a clause reaches the user as itself, not
        # wrapped in a cattrs exception group.
        return Effect(
            record_written=structure_rw(d["record_written"], RecordWritten),
            field_equals=tuple(c.structure(f, FieldEquals) for f in d.get("field_equals") or ()),
        )

    c.register_structure_hook(Effect, structure_effect)

    def unstructure_task(t: TaskSpec) -> dict[str, Any]:
        d = {a.name: c.unstructure(getattr(t, a.name)) for a in TaskSpec.__attrs_attrs__}
        d["solution"] = None if t.solution is None else _unstructure_values(t.solution)
        d["initial_state"] = {k: [dict(r) for r in rows] for k, rows in t.initial_state.items()}
        return d

    def structure_task(d: Mapping[str, Any], _: Any) -> TaskSpec:
        from effectbench.model import Category, OracleSpec

        try:
            category = Category(d["category"])
        except (KeyError, ValueError):
            raise InvalidSpec(
                f"task {d.get('task_id')!r}: category {d.get('category')!r} is not one of "
                f"{', '.join(x.value for x in Category)}"
            ) from None
        sol = d.get("solution")
        return TaskSpec(
            task_id=d["task_id"],
            title=d.get("title", d["task_id"]),
            substrate=d["substrate"],
            category=category,
            goal=d["goal"],
            expected_effect=c.structure(d["expected_effect"], Effect),
            oracle=c.structure(d.get("oracle", {}), OracleSpec),
            correct_action_available=bool(d["correct_action_available"]),
            params=dict(d.get("params", {})),
            initial_state={k: tuple(rows) for k, rows in d.get("initial_state", {}).items()},
            solution=None if sol is None else {k: _structure_value(v, None) for k, v in sol.items()},
            fixture=dict(d.get("fixture", {})),
            reversible=bool(d.get("reversible", False)),
            effect_declared=bool(d.get("effect_declared", True)),
            split=d.get("split", "dev"),
        )

    c.register_unstructure_hook(TaskSpec, unstructure_task)
    c.register_structure_hook(TaskSpec, structure_task)

    c.register_unstructure_hook(
        Snapshot,
        lambda s: {
            "readable": s.readable,
            "tables": {k: [dict(r) for r in rows] for k, rows in s.tables.items()},
            "error": s.error,
        },
    )
    c.register_structure_hook(
        Snapshot,
        lambda d, _: Snapshot(
            readable=bool(d["readable"]),
            tables={k: tuple(rows) for k, rows in (d.get("tables") or {}).items()},
            error=d.get("error"),
        ),
    )
    return c


converter: cattrs.Converter = _make_converter()


def to_json(value: Any) -> bytes:
    return orjson.dumps(converter.unstructure(value), option=orjson.OPT_SORT_KEYS)


def from_json(data: bytes | str, cls: type[T]) -> T:
    return converter.structure(orjson.loads(data), cls)


# --------------------------------------------------------------------------- fast decoders
# Rescoring folds every logged episode, and cattrs' dispatch plus a second pass through
# Effect.resolve cost more than the judge itself. These decoders build the same values
# directly for well-formed input and hand anything unusual to the converter, so every
# error (and its message) is still the converter's own. tests/test_codec_fast.py checks
# both paths agree on arbitrary input.


class _NotPlain(Exception):
    """Input the fast decoder does not handle; the converter path decides."""


def _plain_value(v: Any, params: Mapping[str, Any]) -> Any:
    """A scalar as is, ``{"param": NAME}`` resolved from ``params``; _NotPlain otherwise."""
    t = type(v)
    if t is str or t is int or t is float or t is bool or v is None:
        return v
    if t is dict and len(v) == 1:
        name = v.get("param")
        if type(name) is str and name in params:
            return params[name]
    raise _NotPlain


def _fast_effect(d: Any, params: Any) -> Effect:
    if type(d) is not dict or type(params) is not dict:
        raise _NotPlain
    rw = d["record_written"]
    if type(rw) is not dict:
        raise _NotPlain
    table = rw["table"]
    selector = rw["selector"]
    count = rw.get("expected_count", 1)
    key = rw.get("idempotency_key")
    if (
        type(table) is not str
        or type(selector) is not dict
        or not selector
        or type(count) is not int
    ):
        raise _NotPlain
    if count < 0:
        raise _NotPlain
    if key is not None:
        if type(key) is not list or len(key) != 2 or type(key[0]) is not str:
            raise _NotPlain
        key = (key[0], _plain_value(key[1], params))
    fields = []
    for f in d.get("field_equals") or ():
        if type(f) is not dict:
            raise _NotPlain
        name = f.get("field", "")
        if type(name) is not str or not name:
            raise _NotPlain
        fields.append(FieldEquals(name, _plain_value(f["expected"], params)))
    return Effect(
        record_written=RecordWritten(
            table=table,
            selector={k: _plain_value(v, params) for k, v in selector.items()},
            expected_count=count,
            idempotency_key=key,
            forbid_collateral_loss=bool(rw.get("forbid_collateral_loss", True)),
            forbid_stray_writes=bool(rw.get("forbid_stray_writes", False)),
            count_new_only=bool(rw.get("count_new_only", False)),
            id_field=rw.get("id_field", "id"),
        ),
        field_equals=tuple(fields),
    )


def structure_effect_resolved(d: Any, params: Any) -> Effect:
    """``converter.structure(d, Effect).resolve(params)`` in one pass: equal value, and the
    same exception as that expression for any input the fast path does not take."""
    try:
        return _fast_effect(d, params)
    except (_NotPlain, KeyError, TypeError, AttributeError, ValueError):
        pass
    return converter.structure(d, Effect).resolve(params)


def structure_snapshot(d: Any) -> Snapshot:
    """``converter.structure(d, Snapshot)`` without the dispatch (same code, same errors)."""
    return Snapshot(
        readable=bool(d["readable"]),
        tables={k: tuple(rows) for k, rows in (d.get("tables") or {}).items()},
        error=d.get("error"),
    )
