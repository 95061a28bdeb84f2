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
