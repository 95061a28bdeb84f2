"""The single mutations of the oracle mutation audit, as pure values (docs/audit.md).

From what the store held before and after the reference ran (``StoreState``), ``plan``
lists every single mutation of the record the reference left behind: each column of
each row the reference wrote or changed (type-aware), each such row deleted and
duplicated, a row it deleted restored, one untouched row of the same table changed, and
one row changed (or added) in every other table. ``apply`` performs one on a twin's
store, locating its row again on that twin, so a mutation never carries a row id from
another store. Nothing here judges: the oracle reads the mutated store and the audit
judges what it read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Literal

import attrs

from effectbench.core.model import JSONScalar, Row
from effectbench.core.store import RecordStore, StoredRow, StoredTable, StoreRefused

__all__ = [
    "ROW_KINDS",
    "Mutation",
    "StoreState",
    "apply",
    "declared",
    "plan",
    "read_state",
    "written_rows",
]

Target = Literal["written", "removed", "untouched", "other"]
ALTER_SUFFIX: Final = "-mutated"
ROW_KINDS: Final = ("deleted", "duplicated", "restored", "added")
"""Mutations of a whole row: only a ``table.*`` declaration excuses them."""


@attrs.frozen
class StoreState:
    """Every table of a store and its rows, in the store's order."""

    tables: tuple[StoredTable, ...]
    rows: Mapping[str, tuple[StoredRow, ...]]

    def table(self, name: str) -> StoredTable:
        return next(t for t in self.tables if t.name == name)


async def read_state(store: RecordStore) -> StoreState:
    tables = tuple(await store.tables())
    return StoreState(tables, {t.name: tuple(await store.rows(t.name)) for t in tables})


@attrs.frozen
class Mutation:
    """One mutation: which row (``target``, ``index`` among such rows of ``table`` in store
    order), which ``column`` (None: the whole row) and how (``kind``)."""

    table: str
    target: Target
    index: int
    column: str | None
    kind: str

    @property
    def where(self) -> str:
        """``table.column`` (or ``table`` for a whole-row mutation): what a declaration names."""
        return self.table if self.column is None else f"{self.table}.{self.column}"

    @property
    def name(self) -> str:
        row = {"written": "", "removed": "", "untouched": " of an untouched row",
               "other": " of another table's row"}[self.target]  # fmt: skip
        return f"{self.where} {self.kind}{row}"

    def plain(self) -> dict[str, JSONScalar]:
        """The mutation as logged: its fields and its ``name``."""
        return {**attrs.asdict(self), "name": self.name}

    @classmethod
    def of(cls, plain: Mapping[str, Any]) -> Mutation | None:
        """The mutation ``plain`` (logged, untrusted) names, or None when it names none."""
        column = plain.get("column")
        try:
            return cls(
                str(plain["table"]),
                plain["target"],
                int(plain["index"]),
                None if column is None else str(column),
                str(plain["kind"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


def declared(irrelevant: Mapping[str, str], m: Mutation) -> str | None:
    """The reason ``irrelevant`` (a task's ``oracle.irrelevant``) gives for ``m``, or None:
    ``table.*`` covers every mutation of the table, ``table.column`` only that column's
    value mutations (a row deleted, duplicated, restored or added is never a column's)."""
    whole = irrelevant.get(f"{m.table}.*")
    if whole is not None:
        return whole
    if m.column is None or m.kind in ROW_KINDS:
        return None
    return irrelevant.get(m.where)


def written_rows(
    pre: StoreState, post: StoreState
) -> tuple[dict[str, list[StoredRow]], dict[str, list[StoredRow]]]:
    """Per table, the rows the reference added or changed (in post) and removed (from pre)."""
    written: dict[str, list[StoredRow]] = {}
    removed: dict[str, list[StoredRow]] = {}
    for name, rows in post.rows.items():
        before = {r.locator: r.values for r in pre.rows.get(name, ())}
        changed = [r for r in rows if before.get(r.locator) != r.values]
        if changed:
            written[name] = changed
        after = {r.locator for r in rows}
        gone = [r for r in pre.rows.get(name, ()) if r.locator not in after]
        if gone:
            removed[name] = gone
    return written, removed


def _decimal(value: str) -> Decimal | None:
    try:
        d = Decimal(value.strip())
    except InvalidOperation:
        return None
    return d if d.is_finite() and value.strip() == value and value else None


def _value_kinds(value: JSONScalar) -> list[tuple[str, JSONScalar]]:
    """(kind, mutated value) for one column value; none that leave it as it was."""
    out: list[tuple[str, JSONScalar]] = []
    if isinstance(value, bool):
        out.append(("flipped", not value))
    elif isinstance(value, (int, float)):
        out += [("offset", value + 1), ("x10", value * 10), ("x0.01", value * 0.01)]
    elif isinstance(value, str):
        d = _decimal(value)
        if d is not None:
            out += [
                ("offset", str(d + 1)),
                ("x10", str(d * 10)),
                ("x0.01", str(d * Decimal("0.01"))),
            ]
        out += [("altered", f"{value}{ALTER_SUFFIX}"), ("emptied", "")]
    if value is None:
        out.append(("set", ALTER_SUFFIX.lstrip("-")))
    else:
        out.append(("null", None))
    return [(k, v) for k, v in out if not _same(v, value)]


def _number(v: JSONScalar) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _same(a: JSONScalar, b: JSONScalar) -> bool:
    """Equal as the store compares: 0.0 is 0 (a mutation that changes nothing is none),
    but a boolean is no number."""
    if _number(a) and _number(b):
        return a == b
    return type(a) is type(b) and a == b


def _key_values(state: StoreState) -> dict[str, list[tuple[str, JSONScalar]]]:
    """For sibling moves: per table with a one-column key (or an ``id`` column), its
    (column, value) of every row."""
    out: dict[str, list[tuple[str, JSONScalar]]] = {}
    for t in state.tables:
        rows = state.rows.get(t.name, ())
        col = t.key[0] if len(t.key) == 1 else "id"
        if rows and all(col in r.values for r in rows):
            out[t.name] = [(col, r.values[col]) for r in rows]
    return out


def _sibling(
    state: StoreState, table: StoredTable, column: str, value: JSONScalar
) -> JSONScalar | None:
    """Another row's key for a column that refers to a row (declared, or holding a value
    some other table's key holds): the foreign key moved to a sibling row."""
    if value is None or isinstance(value, (bool, float)):
        return None
    keys = _key_values(state)
    ref = table.references.get(column)
    candidates: list[list[JSONScalar]] = []
    if ref is not None:
        candidates.append([r.values.get(ref[1]) for r in state.rows.get(ref[0], ())])
    for name, pairs in keys.items():
        if name == table.name:
            continue
        vals = [v for _, v in pairs]
        if any(type(v) is type(value) and v == value for v in vals):
            candidates.append(vals)
    for vals in candidates:
        for v in vals:
            if v is not None and type(v) is type(value) and v != value:
                return v
    return None


def _first_change(row: Row, key: tuple[str, ...]) -> tuple[str, str] | None:
    """The column (and kind) one change of an untouched row alters: its first non-key
    column, else its first column."""
    cols = [c for c in row if c not in key] or list(row)
    if not cols:
        return None
    return cols[0], _value_kinds(row[cols[0]])[0][0]


def plan(pre: StoreState, post: StoreState) -> tuple[Mutation, ...]:
    """Every single mutation of ``post``, the record the reference left behind."""
    written, removed = written_rows(pre, post)
    out: list[Mutation] = []
    for t in post.tables:
        rows = post.rows.get(t.name, ())
        mine = written.get(t.name, [])
        for i, r in enumerate(mine):
            for col, value in r.values.items():
                out += [Mutation(t.name, "written", i, col, k) for k, _ in _value_kinds(value)]
                if _sibling(post, t, col, value) is not None:
                    out.append(Mutation(t.name, "written", i, col, "sibling"))
            out.append(Mutation(t.name, "written", i, None, "deleted"))
            out.append(Mutation(t.name, "written", i, None, "duplicated"))
        for i, _ in enumerate(removed.get(t.name, [])):
            out.append(Mutation(t.name, "removed", i, None, "restored"))
        touched = {r.locator for r in mine}
        untouched = [r for r in rows if r.locator not in touched]
        if t.name in written or t.name in removed:
            if untouched:
                change = _first_change(untouched[0].values, t.key)
                if change is not None:
                    out.append(Mutation(t.name, "untouched", 0, *change))
            continue
        if rows:
            change = _first_change(rows[0].values, t.key)
            if change is not None:
                out.append(Mutation(t.name, "other", 0, *change))
        else:
            out.append(Mutation(t.name, "other", 0, None, "added"))
    return tuple(out)


def _fresh(values: Sequence[JSONScalar], like: JSONScalar) -> JSONScalar:
    if isinstance(like, int) and not isinstance(like, bool):
        return max([v for v in values if isinstance(v, int)] + [0]) + 1
    return f"{like}-dup"


def _row_at(pre: StoreState, post: StoreState, m: Mutation) -> StoredRow:
    written, removed = written_rows(pre, post)
    if m.target == "written":
        pool = written.get(m.table, [])
    elif m.target == "removed":
        pool = removed.get(m.table, [])
    else:
        touched = {r.locator for r in written.get(m.table, [])}
        pool = [r for r in post.rows.get(m.table, ()) if r.locator not in touched]
    if m.index >= len(pool):
        raise StoreRefused(f"{m.table}: this twin has no such row ({m.target} #{m.index})")
    return pool[m.index]


def _duplicate(state: StoreState, table: StoredTable, values: Row) -> dict[str, JSONScalar]:
    row = dict(values)
    rows = state.rows.get(table.name, ())
    for k in table.key:
        row[k] = _fresh([r.values.get(k) for r in rows], row.get(k))
    return row


def _mutated_value(
    state: StoreState, table: StoredTable, m: Mutation, value: JSONScalar
) -> JSONScalar:
    if m.kind == "sibling":
        moved = _sibling(state, table, str(m.column), value)
        if moved is None:
            raise StoreRefused(f"{m.where}: no sibling row on this twin")
        return moved
    for kind, new in _value_kinds(value):
        if kind == m.kind:
            return new
    raise StoreRefused(f"{m.where}: {m.kind} does not change {value!r} on this twin")


async def apply(store: RecordStore, pre: StoreState, post: StoreState, m: Mutation) -> str:
    """Perform ``m`` on ``store`` (whose state is ``post``, reached from ``pre`` by the
    reference); returns what was done, in words. StoreRefused when it cannot be done."""
    table = next((t for t in post.tables if t.name == m.table), None)
    if table is None:
        raise StoreRefused(f"this twin has no table {m.table!r}")
    if m.kind == "added":
        rows = post.rows.get(m.table, ())
        if rows:
            await store.insert(m.table, _duplicate(post, table, rows[0].values))
        else:
            await store.insert(m.table, {})
        return f"added a row to {m.table}"
    row = _row_at(pre, post, m)
    if m.kind == "deleted":
        await store.delete(m.table, row.locator)
        return f"deleted {m.table} row {row.locator!r}"
    if m.kind in ("duplicated", "restored"):
        values = dict(row.values) if m.kind == "restored" else _duplicate(post, table, row.values)
        await store.insert(m.table, values)
        return f"{m.kind} {m.table} row {row.locator!r}"
    assert m.column is not None
    old = row.values.get(m.column)
    new = _mutated_value(post, table, m, old)
    await store.update(m.table, row.locator, {m.column: new})
    return f"{m.where} of row {row.locator!r}: {old!r} -> {new!r}"
