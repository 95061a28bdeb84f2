"""The one cattrs converter for every model type, with orjson for bytes.

A ParamRef is written as ``{"param": NAME}`` so a task file stays readable JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

import cattrs
import orjson

from effectbench.core.model import (
    AnyEffect,
    Category,
    Delete,
    DiffEffect,
    Effect,
    FieldEquals,
    Insert,
    InvalidSpec,
    OracleSpec,
    ParamRef,
    RecordWritten,
    Snapshot,
    Split,
    Substrate,
    TaskSpec,
    Update,
    Value,
    plain_value,
    plain_values,
)

T = TypeVar("T")


def _unstructure_value(v: Any) -> Any:
    return plain_value(v)


def _structure_value(v: Any, _: Any) -> Value:
    if isinstance(v, Mapping):
        if set(v) == {"param"} and isinstance(v["param"], str):
            return ParamRef(v["param"])
        raise InvalidSpec(f'a value must be a JSON scalar or {{"param": NAME}}, got {v!r}')
    if isinstance(v, (list, tuple)):
        raise InvalidSpec(f'a value must be a JSON scalar or {{"param": NAME}}, got a list {v!r}')
    return v  # type: ignore[no-any-return]


_unstructure_values = plain_values


# --------------------------------------------------------------------------- strict reading
# Task files and logged plans are untrusted JSON. Every field is type-checked here so a
# bad file is an InvalidSpec that names the field, never a KeyError or cattrs traceback,
# and so "false" (a string) can never become True through bool().

_MISSING: Any = object()
_ARRAY = (list, tuple)  # JSON arrays; tuples too, for values that never went through bytes


def _obj(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise InvalidSpec(f"{where} must be a JSON object, got {v!r}")
    return v


def _take(d: Mapping[str, Any], key: str, where: str, default: Any) -> Any:
    if key in d:
        return d[key]
    if default is _MISSING:
        raise InvalidSpec(f"{where}: {key!r} is missing")
    return default


def _bool(d: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> bool:
    v = _take(d, key, where, default)
    if type(v) is not bool:
        raise InvalidSpec(f"{where}: {key!r} must be true or false, got {v!r}")
    return v


def _int(d: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> int:
    v = _take(d, key, where, default)
    if type(v) is not int:
        raise InvalidSpec(f"{where}: {key!r} must be an integer, got {v!r}")
    return v


def _str(d: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> str:
    v = _take(d, key, where, default)
    if type(v) is not str:
        raise InvalidSpec(f"{where}: {key!r} must be a string, got {v!r}")
    return v


def _scalar(v: Any, where: str) -> Any:
    if v is None or type(v) in (str, int, float, bool):
        return v
    raise InvalidSpec(
        f"{where} must be a JSON scalar (string, number, true/false or null), got {v!r}"
    )


def _values(v: Any, where: str) -> dict[str, Value]:
    return {k: _structure_value(x, None) for k, x in _obj(v, where).items()}


def _structure_rw(d: Any) -> RecordWritten:
    where = "record_written"
    d = _obj(d, where)
    key = _take(d, "idempotency_key", where, None)
    if key is not None and (
        not isinstance(key, _ARRAY) or len(key) != 2 or type(key[0]) is not str
    ):
        raise InvalidSpec(f"{where}: 'idempotency_key' must be [column, value], got {key!r}")
    return RecordWritten(
        table=_str(d, "table", where),
        selector=_values(_take(d, "selector", where, _MISSING), f"{where}.selector"),
        expected_count=_int(d, "expected_count", where, 1),
        idempotency_key=None if key is None else (key[0], _structure_value(key[1], None)),
        forbid_collateral_loss=_bool(d, "forbid_collateral_loss", where, True),
        forbid_stray_writes=_bool(d, "forbid_stray_writes", where, False),
        count_new_only=_bool(d, "count_new_only", where, False),
        id_field=_str(d, "id_field", where, "id"),
    )


def _structure_field_equals(d: Any) -> FieldEquals:
    d = _obj(d, "a field_equals clause")
    return FieldEquals(
        field=_str(d, "field", "field_equals", ""),
        expected=_structure_value(_take(d, "expected", "field_equals", _MISSING), None),
    )


def _structure_effect(d: Any) -> Effect:
    d = _obj(d, "an effect")
    clauses = d.get("field_equals") or ()
    if not isinstance(clauses, _ARRAY):
        raise InvalidSpec(f"field_equals must be a list of clauses, got {clauses!r}")
    return Effect(
        record_written=_structure_rw(_take(d, "record_written", "effect", _MISSING)),
        field_equals=tuple(_structure_field_equals(f) for f in clauses),
    )


def _structure_change(d: Any, where: str) -> Insert | Update | Delete:
    d = _obj(d, where)
    kinds = [k for k in ("insert", "update", "delete") if k in d]
    if len(kinds) != 1:
        raise InvalidSpec(
            f"{where} must name its table under exactly one of insert, update, delete"
        )
    kind = kinds[0]
    table = _str(d, kind, where)
    if kind == "insert":
        return Insert(
            table,
            _values(_take(d, "fields", where, _MISSING), f"{where}.fields"),
            _int(d, "count", where, 1),
        )
    key = _values(_take(d, "key", where, _MISSING), f"{where}.key")
    if kind == "delete":
        return Delete(table, key)
    return Update(
        table,
        key,
        _values(_take(d, "after", where, _MISSING), f"{where}.after"),
        _values(_take(d, "before", where, {}), f"{where}.before"),
    )


def _structure_diff(d: Any) -> DiffEffect:
    where = "diff"
    d = _obj(d, where)
    changes = _take(d, "changes", where, [])
    if not isinstance(changes, _ARRAY):
        raise InvalidSpec(f"{where}: 'changes' must be a list, got {changes!r}")
    keys = _obj(_take(d, "keys", where, {}), f"{where}.keys")
    for table, cols in keys.items():
        if not isinstance(cols, _ARRAY) or not cols or not all(type(c) is str for c in cols):
            raise InvalidSpec(f"{where}.keys.{table} must be a non-empty list of column names")
    allow = _take(d, "allow", where, [])
    if not isinstance(allow, _ARRAY) or not all(type(a) is str for a in allow):
        raise InvalidSpec(f"{where}: 'allow' must be a list of 'table.field' strings")
    reference = _take(d, "reference", where, None)
    if reference is not None and type(reference) is not str:
        raise InvalidSpec(f"{where}: 'reference' must be an arm name, got {reference!r}")
    mode = _str(d, "mode", where, "declared")
    if mode not in ("declared", "reference"):
        raise InvalidSpec(f"{where}: mode {mode!r} is not one of declared, reference")
    return DiffEffect(
        changes=tuple(_structure_change(c, f"{where}.changes[{i}]") for i, c in enumerate(changes)),
        keys=keys,
        allow=tuple(allow),
        mode=mode,
        reference=reference,
    )


unstructure_diff = DiffEffect.plain
"""``{"diff": {...}}``: the JSON form of a state diff (it lives on the type, so hashing
needs no codec)."""


def structure_any_effect(d: Any) -> AnyEffect:
    """An insert clause (``record_written``) or a state diff (``diff``)."""
    if isinstance(d, Mapping) and "diff" in d:
        if "record_written" in d:
            raise InvalidSpec("an effect is either record_written or diff, not both")
        return _structure_diff(d["diff"])
    return _structure_effect(d)


def _structure_oracle(d: Any) -> OracleSpec:
    where = "oracle"
    d = _obj(d, where)
    tables = _take(d, "tables", where, ())
    if not isinstance(tables, _ARRAY) or not all(type(t) is str for t in tables):
        raise InvalidSpec(f"{where}: 'tables' must be a list of table names, got {tables!r}")
    return OracleSpec(
        channel=_str(d, "channel", where, "snapshot"),
        tables=tables,
        isolated_from_agent=_bool(d, "isolated_from_agent", where, True),
        trial_unique_payload=_bool(d, "trial_unique_payload", where, True),
        refusal_controls=_bool(d, "refusal_controls", where, False),
        adversarially_audited=_bool(d, "adversarially_audited", where, False),
        irrelevant=_irrelevant(_take(d, "irrelevant", where, {}), where),
    )


def _irrelevant(v: Any, where: str) -> dict[str, str]:
    d = _obj(v, f"{where}.irrelevant")
    for entry, reason in d.items():
        if type(reason) is not str:
            raise InvalidSpec(f"{where}.irrelevant.{entry} must be the reason, a string")
    return dict(d)


def _unstructure_oracle(o: OracleSpec) -> dict[str, Any]:
    """Every field; ``irrelevant`` only when it lists something, so a task that declares
    nothing keeps the plan (and pack fingerprint) it had before the field existed."""
    d: dict[str, Any] = {
        "channel": o.channel,
        "tables": list(o.tables),
        "isolated_from_agent": o.isolated_from_agent,
        "trial_unique_payload": o.trial_unique_payload,
        "refusal_controls": o.refusal_controls,
        "adversarially_audited": o.adversarially_audited,
    }
    if o.irrelevant:
        d["irrelevant"] = dict(o.irrelevant)
    return d


def _enum(
    d: Mapping[str, Any], key: str, enum: type[StrEnum], where: str, default: Any = _MISSING
) -> Any:
    v = _take(d, key, where, default)
    try:
        return enum(v)
    except (ValueError, TypeError):
        raise InvalidSpec(
            f"{where}: {key} {v!r} is not one of {', '.join(x.value for x in enum)}"
        ) from None


def _rows(v: Any, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(v, _ARRAY):
        raise InvalidSpec(f"{where} must be a list of rows, got {v!r}")
    return tuple(
        {c: _scalar(x, f"{where}[{i}].{c}") for c, x in _obj(r, f"{where}[{i}]").items()}
        for i, r in enumerate(v)
    )


def _structure_task(raw: Any) -> TaskSpec:
    d = _obj(raw, "a task")
    task_id = _str(d, "task_id", "task")
    where = f"task {task_id!r}"
    params = _obj(_take(d, "params", where, {}), f"{where}: params")
    for name, template in params.items():
        if type(template) is not str:
            raise InvalidSpec(
                f"{where}: param {name!r} must be a string template, got {template!r}"
            )
    sol = _take(d, "solution", where, None)
    try:
        return TaskSpec(
            task_id=task_id,
            title=_str(d, "title", where, task_id),
            substrate=_enum(d, "substrate", Substrate, where),
            category=_enum(d, "category", Category, where, None),
            goal=_str(d, "goal", where),
            expected_effect=structure_any_effect(_take(d, "expected_effect", where, _MISSING)),
            oracle=_structure_oracle(_take(d, "oracle", where, {})),
            correct_action_available=_bool(d, "correct_action_available", where),
            params=dict(params),
            initial_state={
                t: _rows(rows, f"{where}: initial_state.{t}")
                for t, rows in _obj(
                    _take(d, "initial_state", where, {}), f"{where}: initial_state"
                ).items()
            },
            solution=None if sol is None else _values(sol, f"{where}: solution"),
            fixture={
                k: _scalar(v, f"{where}: fixture.{k}")
                for k, v in _obj(_take(d, "fixture", where, {}), f"{where}: fixture").items()
            },
            reversible=_bool(d, "reversible", where, False),
            effect_declared=_bool(d, "effect_declared", where, True),
            split=_enum(d, "split", Split, where, "dev"),
        )
    except InvalidSpec as exc:
        msg = str(exc)
        raise InvalidSpec(msg if msg.startswith(where) else f"{where}: {msg}") from None


def structure_snapshot(d: Any) -> Snapshot:
    """A logged snapshot, checked just enough that the judge can read it (a dict of
    tables, each a list of row objects); ValueError otherwise."""
    if type(d) is not dict:
        raise ValueError(f"a snapshot must be a JSON object, got {type(d).__name__}")
    readable = d["readable"]
    if type(readable) is not bool:
        raise ValueError(f"snapshot 'readable' must be true or false, got {readable!r}")
    raw = d.get("tables") or {}
    if type(raw) is not dict:
        raise ValueError(f"snapshot 'tables' must be an object, got {type(raw).__name__}")
    tables = {}
    for name, rows in raw.items():
        rows = tuple(rows) if type(rows) is list else rows
        if type(rows) is not tuple:
            raise ValueError(f"snapshot table {name!r} must be a list of row objects")
        for r in rows:  # a loop, not all(<genexpr>): a table holds a row or two
            if type(r) is not dict:
                raise ValueError(f"snapshot table {name!r} must be a list of row objects")
        tables[name] = rows
    error = d.get("error")
    return Snapshot(readable=readable, tables=tables, error=None if error is None else str(error))


def _make_converter() -> cattrs.Converter:
    c = cattrs.Converter()
    c.register_unstructure_hook(ParamRef, _unstructure_value)
    c.register_structure_hook(ParamRef, lambda v, t: _structure_value(v, t))

    c.register_unstructure_hook(RecordWritten, RecordWritten.plain)
    c.register_structure_hook(RecordWritten, lambda d, _: _structure_rw(d))
    c.register_unstructure_hook(FieldEquals, FieldEquals.plain)
    c.register_unstructure_hook(Effect, Effect.plain)
    c.register_structure_hook(FieldEquals, lambda d, _: _structure_field_equals(d))
    c.register_structure_hook(Effect, lambda d, _: _structure_effect(d))
    c.register_unstructure_hook(DiffEffect, unstructure_diff)
    c.register_structure_hook(DiffEffect, lambda d, _: structure_any_effect(d))
    c.register_structure_hook(OracleSpec, lambda d, _: _structure_oracle(d))
    c.register_unstructure_hook(OracleSpec, _unstructure_oracle)

    def unstructure_task(t: TaskSpec) -> dict[str, Any]:
        d = {a.name: c.unstructure(getattr(t, a.name)) for a in TaskSpec.__attrs_attrs__}
        d["solution"] = None if t.solution is None else _unstructure_values(t.solution)
        d["initial_state"] = {k: [dict(r) for r in rows] for k, rows in t.initial_state.items()}
        return d

    c.register_unstructure_hook(TaskSpec, unstructure_task)
    c.register_structure_hook(TaskSpec, lambda d, _: _structure_task(d))

    c.register_unstructure_hook(
        Snapshot,
        lambda s: {
            "readable": s.readable,
            "tables": {k: [dict(r) for r in rows] for k, rows in s.tables.items()},
            "error": s.error,
        },
    )
    c.register_structure_hook(Snapshot, lambda d, _: structure_snapshot(d))
    return c


converter: cattrs.Converter = _make_converter()


def to_json(value: Any) -> bytes:
    return orjson.dumps(converter.unstructure(value), option=orjson.OPT_SORT_KEYS)


def from_json(data: bytes | str, cls: type[T]) -> T:
    """Decode and structure; bad JSON or a bad spec is an InvalidSpec (a ValueError)."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidSpec(f"not valid JSON: {exc}") from None
    return converter.structure(raw, cls)


# --------------------------------------------------------------------------- fast decoders
# Rescoring folds every logged episode, and cattrs' dispatch plus a second pass through
# Effect.resolve cost more than the judge itself. These decoders build the same values
# directly for well-formed input and hand anything unusual to the converter, so every
# error (and its message) is still the converter's own. tests/core/test_codec_fast.py checks
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
    collateral = rw.get("forbid_collateral_loss", True)
    stray = rw.get("forbid_stray_writes", False)
    new_only = rw.get("count_new_only", False)
    id_field = rw.get("id_field", "id")
    if (
        type(collateral) is not bool
        or type(stray) is not bool
        or type(new_only) is not bool
        or type(id_field) is not str
    ):
        raise _NotPlain
    return Effect(
        record_written=RecordWritten(
            table=table,
            selector={k: _plain_value(v, params) for k, v in selector.items()},
            expected_count=count,
            idempotency_key=key,
            forbid_collateral_loss=collateral,
            forbid_stray_writes=stray,
            count_new_only=new_only,
            id_field=id_field,
        ),
        field_equals=tuple(fields),
    )


def structure_effect_resolved(d: Any, params: Any) -> AnyEffect:
    """``converter.structure(d, Effect).resolve(params)`` in one pass: equal value, and the
    same exception as that expression for any input the fast path does not take."""
    try:
        return _fast_effect(d, params)
    except (_NotPlain, KeyError, TypeError, AttributeError, ValueError):
        pass
    return structure_any_effect(d).resolve(params)
