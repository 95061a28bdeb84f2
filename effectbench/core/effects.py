"""What a task must leave in the system of record: the effect contract.

Two forms (SPEC 1.0 and 1.1): ``Effect``, the insert clause (a record written, fields
it must hold), and ``DiffEffect``, a state diff (rows inserted, updated, deleted, and
nothing else changed). Both are written in run parameters (``ParamRef``) that a trial
resolves. Frozen attrs classes, validated at construction; ``effectbench.core.model``
re-exports every name, its public home.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, TypeAlias

import attrs

from effectbench.core import hashing
from effectbench.core.errors import InvalidSpec

JSONScalar: TypeAlias = str | int | float | bool | None
Row: TypeAlias = Mapping[str, JSONScalar]


@attrs.frozen
class ParamRef:
    """A reference to a run parameter, resolved per trial (e.g. this trial's note)."""

    name: str


Value: TypeAlias = JSONScalar | ParamRef


def plain_value(v: Value) -> JSONScalar | dict[str, str]:
    """A value as JSON: a scalar as is, a ParamRef as ``{"param": NAME}``."""
    return {"param": v.name} if isinstance(v, ParamRef) else v


def plain_values(m: Mapping[str, Value]) -> dict[str, Any]:
    return {k: plain_value(v) for k, v in m.items()}


def _check_selector(instance: Any, attribute: Any, value: Mapping[str, Value]) -> None:
    if not value:
        raise InvalidSpec(
            f"{type(instance).__name__}.selector is empty: name the columns that identify the "
            "record"
        )


def _fields_tuple(value: Iterable[FieldEquals]) -> tuple[FieldEquals, ...]:
    """Typed stand-in for ``converter=tuple``, which mypy's attrs plugin cannot bind."""
    return tuple(value)


def str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    """The converter of a tuple-of-strings field (the task types share it)."""
    return tuple(value)


def sorted_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """The converter of a mapping field: a dict in key order, so equal specs compare and
    serialise the same (the task types share it)."""
    return dict(sorted(value.items()))


@attrs.frozen
class RecordWritten:
    """The record the task must leave behind, counted in one table of the system of record.

    ``count_new_only`` counts only rows absent from the pre-snapshot (needs a readable
    pre-state). ``forbid_collateral_loss`` refutes when a pre-existing row outside the
    selector vanished. ``forbid_stray_writes`` refutes when any snapshotted table gained
    or changed a row outside the selector (an unaudited side write).
    """

    table: str
    selector: Mapping[str, Value] = attrs.field(converter=sorted_mapping, validator=_check_selector)
    expected_count: int = attrs.field(default=1)
    idempotency_key: tuple[str, Value] | None = None
    forbid_collateral_loss: bool = True
    forbid_stray_writes: bool = False
    count_new_only: bool = False
    id_field: str = "id"

    @expected_count.validator
    def _check_count(self, attribute: Any, value: int) -> None:
        if value < 0:
            raise InvalidSpec("RecordWritten.expected_count must be >= 0")

    def plain(self) -> dict[str, Any]:
        """The JSON form the codec writes and the content hash covers."""
        key = self.idempotency_key
        return {
            "table": self.table,
            "selector": plain_values(self.selector),
            "expected_count": self.expected_count,
            "idempotency_key": None if key is None else [key[0], plain_value(key[1])],
            "forbid_collateral_loss": self.forbid_collateral_loss,
            "forbid_stray_writes": self.forbid_stray_writes,
            "count_new_only": self.count_new_only,
            "id_field": self.id_field,
        }


@attrs.frozen
class FieldEquals:
    """Every row the record_written clause selects must hold ``expected`` in ``field``."""

    field: str = attrs.field()
    expected: Value = attrs.field()

    @field.validator
    def _check_field(self, attribute: Any, value: str) -> None:
        if not value:
            raise InvalidSpec(
                "field_equals needs a field name: which column must hold the expected value?"
            )

    def plain(self) -> dict[str, Any]:
        return {"field": self.field, "expected": plain_value(self.expected)}


@attrs.frozen
class Effect:
    """The declared effect contract: what must be true of the record for success."""

    record_written: RecordWritten
    field_equals: tuple[FieldEquals, ...] = attrs.field(default=(), converter=_fields_tuple)

    def resolve(self, params: Mapping[str, str]) -> Effect:
        """Replace every ParamRef with this trial's value; unknown params are an error."""
        rw = self.record_written
        key = rw.idempotency_key
        return Effect(
            record_written=attrs.evolve(
                rw,
                selector={k: _sub(v, params) for k, v in rw.selector.items()},
                idempotency_key=None if key is None else (key[0], _sub(key[1], params)),
            ),
            field_equals=tuple(
                FieldEquals(f.field, _sub(f.expected, params)) for f in self.field_equals
            ),
        )

    def plain(self) -> dict[str, Any]:
        """The JSON form the codec writes and the content hash covers."""
        return {
            "record_written": self.record_written.plain(),
            "field_equals": [f.plain() for f in self.field_equals],
        }

    def content_hash(self) -> str:
        """Deprecated: use ``effectbench.core.hashing.content_hash(effect)``."""
        warnings.warn(
            "Effect.content_hash() is deprecated; use effectbench.core.hashing.content_hash",
            DeprecationWarning,
            stacklevel=2,
        )
        return hashing.content_hash(self)

    @property
    def is_resolved(self) -> bool:
        values: list[Value] = [
            *self.record_written.selector.values(),
            *(f.expected for f in self.field_equals),
        ]
        if self.record_written.idempotency_key is not None:
            values.append(self.record_written.idempotency_key[1])
        return not any(isinstance(v, ParamRef) for v in values)


def _sub(v: Value, params: Mapping[str, str]) -> Value:
    if isinstance(v, ParamRef):
        if v.name not in params:
            raise InvalidSpec(
                f"effect refers to run param {v.name!r} which the task does not define"
            )
        return params[v.name]
    return v


def _sub_all(m: Mapping[str, Value], params: Mapping[str, str]) -> dict[str, Value]:
    return {k: _sub(v, params) for k, v in m.items()}


def _nonempty(what: str) -> Any:
    def check(instance: Any, attribute: Any, value: Mapping[str, Value]) -> None:
        if not value:
            raise InvalidSpec(f"{type(instance).__name__}.{attribute.name} is empty: {what}")

    return check


@attrs.frozen
class Insert:
    """``count`` new rows of ``table`` (absent from the pre-snapshot by key) holding ``fields``.
    Columns not named are free (the product assigns ids and timestamps)."""

    table: str
    fields: Mapping[str, Value] = attrs.field(
        converter=sorted_mapping, validator=_nonempty("name the values the new row must hold")
    )
    count: int = attrs.field(default=1)

    @count.validator
    def _check_count(self, attribute: Any, value: int) -> None:
        if value < 1:
            raise InvalidSpec("Insert.count must be >= 1 (a diff of nothing is no change at all)")


@attrs.frozen
class Update:
    """The row of ``table`` with ``key`` changes in place: each field of ``after`` ends up
    holding that value, ``before`` (optional) says what it held; every other field stays."""

    table: str
    key: Mapping[str, Value] = attrs.field(
        converter=sorted_mapping, validator=_nonempty("name the key columns of the row")
    )
    after: Mapping[str, Value] = attrs.field(
        converter=sorted_mapping, validator=_nonempty("name the fields the update sets")
    )
    before: Mapping[str, Value] = attrs.field(factory=dict, converter=sorted_mapping)


@attrs.frozen
class Delete:
    """The row of ``table`` with ``key`` is gone after the episode."""

    table: str
    key: Mapping[str, Value] = attrs.field(
        converter=sorted_mapping, validator=_nonempty("name the key columns of the row")
    )


Change: TypeAlias = Insert | Update | Delete


def _changes_tuple(value: Iterable[Change]) -> tuple[Change, ...]:
    return tuple(value)


def _keys_map(value: Mapping[str, Iterable[str]]) -> Mapping[str, tuple[str, ...]]:
    return {t: tuple(cols) for t, cols in sorted(value.items())}


class DiffMode(StrEnum):
    DECLARED = "declared"
    REFERENCE = "reference"


def _plain_change(c: Change) -> dict[str, Any]:
    if isinstance(c, Insert):
        return {"insert": c.table, "fields": plain_values(c.fields), "count": c.count}
    if isinstance(c, Update):
        return {
            "update": c.table,
            "key": plain_values(c.key),
            "after": plain_values(c.after),
            "before": plain_values(c.before),
        }
    return {"delete": c.table, "key": plain_values(c.key)}


@attrs.frozen
class DiffEffect:
    """An effect as a state diff (SPEC.md 1.1): the change the episode must make to the
    system of record, and that nothing else changed in any table the oracle reads.

    ``keys`` names each table's key columns (rows pair by key; a table not named pairs
    rows by their whole content). ``allow`` lists what the product itself moves: a
    ``"table.field"`` may change in any row, a ``"table.*"`` table may change freely
    (audit rows). ``mode`` ``reference``: the expected changes are not declared but
    observed, on a twin, from the reference program (a scripted arm) named in
    ``reference``; ``changes`` is then empty.
    """

    changes: tuple[Change, ...] = attrs.field(default=(), converter=_changes_tuple)
    keys: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, converter=_keys_map)
    allow: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    mode: DiffMode = attrs.field(default=DiffMode.DECLARED, converter=DiffMode)
    reference: str | None = None

    def __attrs_post_init__(self) -> None:
        for c in self.changes:
            if isinstance(c, Insert):
                continue
            declared = self.keys.get(c.table)
            if declared is None:
                raise InvalidSpec(
                    f"{type(c).__name__} of table {c.table!r}: declare its key columns in keys"
                )
            if set(c.key) != set(declared):
                raise InvalidSpec(
                    f"{type(c).__name__} of table {c.table!r} must name exactly its key columns "
                    f"{list(declared)}, got {sorted(c.key)}"
                )
        for entry in self.allow:
            if "." not in entry or entry.startswith(".") or entry.endswith("."):
                raise InvalidSpec(f"allow entry {entry!r} must read 'table.field' or 'table.*'")
            if entry.partition(".")[0] == "*":
                raise InvalidSpec(
                    f"allow entry {entry!r} allows every table: a diff that lets anything change "
                    "checks nothing; name the tables (or fields) the product moves by itself"
                )
        for c in self.changes:
            self._check_not_allowed(c)
        if self.mode is DiffMode.REFERENCE:
            if not self.reference:
                raise InvalidSpec(
                    "a reference diff names its reference program (an arm) in reference"
                )
            if self.changes:
                raise InvalidSpec(
                    "a reference diff declares no changes: the reference program's observed "
                    "diff is the expected one"
                )
        elif self.reference is not None:
            raise InvalidSpec("reference is only for mode 'reference'")

    def _check_not_allowed(self, c: Change) -> None:
        """A declared change to something the allow-list lets move freely is never checked:
        the two contradict each other, so the task is refused when it is built."""
        name = type(c).__name__
        if f"{c.table}.*" in self.allow:
            raise InvalidSpec(
                f"{name} of table {c.table!r} contradicts allow entry '{c.table}.*' (the whole "
                "table may change freely, so the declared change would never be checked)"
            )
        fields = c.fields if isinstance(c, Insert) else c.after if isinstance(c, Update) else {}
        for f in sorted(fields):
            if f"{c.table}.{f}" in self.allow:
                raise InvalidSpec(
                    f"{name} of {c.table}.{f} contradicts allow entry '{c.table}.{f}' (that field "
                    "may change freely, so its declared value would never be checked)"
                )

    @property
    def is_reference(self) -> bool:
        return self.mode is DiffMode.REFERENCE

    def plain(self) -> dict[str, Any]:
        """The JSON form the codec writes and the content hash covers: ``{"diff": {...}}``,
        so the key tells a diff from an insert clause at a glance."""
        return {
            "diff": {
                "changes": [_plain_change(c) for c in self.changes],
                "keys": {t: list(cols) for t, cols in self.keys.items()},
                "allow": list(self.allow),
                "mode": self.mode.value,
                "reference": self.reference,
            }
        }

    def allowed_fields(self, table: str) -> frozenset[str] | None:
        """The fields of ``table`` the product may move; None when the whole table may change."""
        fields = set()
        for entry in self.allow:
            t, _, f = entry.partition(".")
            if t == table:
                if f == "*":
                    return None
                fields.add(f)
        return frozenset(fields)

    def resolve(self, params: Mapping[str, str]) -> DiffEffect:
        """Replace every ParamRef with this trial's value; unknown params are an error."""
        changes: list[Change] = []
        for c in self.changes:
            if isinstance(c, Insert):
                changes.append(Insert(c.table, _sub_all(c.fields, params), c.count))
            elif isinstance(c, Update):
                changes.append(
                    Update(
                        c.table,
                        _sub_all(c.key, params),
                        _sub_all(c.after, params),
                        _sub_all(c.before, params),
                    )
                )
            else:
                changes.append(Delete(c.table, _sub_all(c.key, params)))
        return attrs.evolve(self, changes=tuple(changes))

    @property
    def is_resolved(self) -> bool:
        for c in self.changes:
            maps = (
                (c.fields,)
                if isinstance(c, Insert)
                else (c.key, c.after, c.before)
                if isinstance(c, Update)
                else (c.key,)
            )
            for m in maps:
                if any(isinstance(v, ParamRef) for v in m.values()):
                    return False
        return True


AnyEffect: TypeAlias = Effect | DiffEffect
"""What a task declares: the insert clause of SPEC 1.0 or a state diff (SPEC 1.1)."""
