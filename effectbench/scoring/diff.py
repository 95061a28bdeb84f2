"""The diff judge (SPEC.md 1.1): the observed change of the system of record against the
expected change, table by table, and nothing else changed.

Pure like the insert judge: rows in, a verdict out. Rows of a table pair by its declared
key columns, or by their whole content when the effect declares none. A field the
effect's allow-list names is never compared (the product moves it: timestamps,
counters); a ``table.*`` entry leaves that whole table out (audit rows).

True states: CORRECT when the observed diff is exactly the expected one; ABSENT when
nothing changed at all (a refusal control's diff of nothing, or a halt); anything else
(a partial diff, a wrong value, an extra change, a lost row) is WRONG_PERSISTED. Each
mismatch names where it is in the logged snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

import attrs

from effectbench.core.model import (
    Delete,
    DiffEffect,
    Insert,
    InvalidSpec,
    Mismatch,
    MismatchKind,
    Row,
    Snapshot,
    TrueState,
    Update,
    Value,
    Verdict,
    VerdictStatus,
)

__all__ = [
    "ObservedDiff",
    "TableDiff",
    "describe_diff",
    "expected_from_reference",
    "judge_diff",
    "observe",
]

_Key: TypeAlias = tuple[str, ...]
_MISSING = object()
PRE, POST = "pre_snapshot", "post_read"


def _same(a: object, b: object) -> bool:
    """Type-strict equality, as the insert judge's same_value ("1" != 1, True != 1)."""
    return type(a) is type(b) and a == b


def _sk(v: object) -> str:
    return f"{type(v).__name__}:{v!r}"


def _content(row: Row, skip: frozenset[str]) -> _Key:
    return tuple(f"{c}={_sk(row[c])}" for c in sorted(row) if c not in skip)


def _key(row: Mapping[str, object], cols: Sequence[str]) -> _Key:
    return tuple(_sk(row.get(c, _MISSING)) for c in cols)


def _desc(row: Mapping[str, object], cols: Sequence[str] | None) -> str:
    shown = cols if cols else sorted(row)
    return "[" + ", ".join(f"{c}={row.get(c)!r}" for c in shown) + "]"


@attrs.frozen
class TableDiff:
    """What changed in one table: new rows, gone rows, and (keyed tables) rows changed in
    place as (before, after, the fields that differ)."""

    table: str
    key: tuple[str, ...] | None
    inserted: tuple[Row, ...]
    deleted: tuple[Row, ...]
    updated: tuple[tuple[Row, Row, tuple[str, ...]], ...]

    @property
    def size(self) -> int:
        return len(self.inserted) + len(self.deleted) + len(self.updated)


ObservedDiff: TypeAlias = tuple[TableDiff, ...]


def _table_diff(
    table: str,
    before: Sequence[Row],
    after: Sequence[Row],
    key: tuple[str, ...] | None,
    skip: frozenset[str],
) -> TableDiff:
    if not key:
        pool: dict[_Key, list[Row]] = {}
        for r in before:
            pool.setdefault(_content(r, skip), []).append(r)
        inserted = []
        for r in after:
            same = pool.get(_content(r, skip))
            if same:
                same.pop()
            else:
                inserted.append(r)
        deleted = [r for rows in pool.values() for r in rows]
        return TableDiff(table, None, tuple(inserted), tuple(deleted), ())
    old: dict[_Key, list[Row]] = {}
    for r in before:
        old.setdefault(_key(r, key), []).append(r)
    inserted, updated = [], []
    for r in after:
        prior = old.get(_key(r, key))
        if not prior:
            inserted.append(r)
            continue
        b = prior.pop(0)
        fields = tuple(
            f
            for f in sorted(set(b) | set(r))
            if f not in skip and not _same(b.get(f, _MISSING), r.get(f, _MISSING))
        )
        if fields:
            updated.append((b, r, fields))
    deleted = [r for rows in old.values() for r in rows]
    return TableDiff(table, key, tuple(inserted), tuple(deleted), tuple(updated))


def observe(effect: DiffEffect, pre: Snapshot, post: Snapshot) -> ObservedDiff:
    """The change from ``pre`` to ``post`` in every table either holds, minus what the
    allow-list lets the product move; tables with no change are left out."""
    out = []
    for table in sorted(set(pre.tables) | set(post.tables)):
        allowed = effect.allowed_fields(table)
        if allowed is None:
            continue
        d = _table_diff(table, pre.rows(table), post.rows(table), effect.keys.get(table), allowed)
        if d.size:
            out.append(d)
    return tuple(out)


# --------------------------------------------------------------------------- expected changes

_Change: TypeAlias = Insert | Update | Delete


def expected_from_reference(
    effect: DiffEffect, ref_pre: Snapshot, ref_post: Snapshot
) -> tuple[_Change, ...]:
    """The reference program's observed diff on the twin, as expected changes: a new row is
    expected on every column but its key and the allowed fields; a changed row's changed
    fields; a gone row (a key-less table's by its whole content)."""
    changes: list[_Change] = []
    for d in observe(effect, ref_pre, ref_post):
        skip = effect.allowed_fields(d.table) or frozenset()
        cols = d.key or ()
        for r in d.inserted:
            fields = {c: v for c, v in r.items() if c not in skip and c not in cols}
            changes.append(Insert(d.table, fields or dict(r)))
        for b, a, changed in d.updated:
            changes.append(
                Update(
                    d.table,
                    {c: b[c] for c in cols},
                    {f: a.get(f) for f in changed},
                    {f: b.get(f) for f in changed},
                )
            )
        for r in d.deleted:
            changes.append(Delete(d.table, {c: r.get(c) for c in cols} if cols else dict(r)))
    return tuple(changes)


def describe_diff(effect: DiffEffect) -> tuple[str, ...]:
    """One line per expected change, then the allow-list (the report's contract view)."""

    def short(m: Mapping[str, Value]) -> str:
        return "{" + ", ".join(f"{k}: {v!r}" for k, v in m.items()) + "}"

    if effect.is_reference:
        lines = [f"the diff reference program {effect.reference!r} makes on a twin"]
    else:
        lines = []
        for c in effect.changes:
            if isinstance(c, Insert):
                lines.append(f"insert {c.count} row(s) into {c.table!r} holding {short(c.fields)}")
            elif isinstance(c, Update):
                lines.append(f"update {c.table!r} {short(c.key)} to {short(c.after)}")
            else:
                lines.append(f"delete {c.table!r} {short(c.key)}")
        lines = lines or ["no change at all (a diff of nothing)"]
    lines.append(
        "nothing else changes" + (f", except {', '.join(effect.allow)}" if effect.allow else "")
    )
    return tuple(lines)


# --------------------------------------------------------------------------- matching


class _FixtureError(Exception):
    """The pre-state cannot hold the declared change: the task's fixture and effect disagree."""


@attrs.define
class _Match:
    """The observed diff being accounted for, change by change."""

    effect: DiffEffect
    diffs: dict[str, TableDiff]
    pre: Snapshot
    tags: tuple[str, str]
    used: set[int] = attrs.field(factory=set)
    mismatches: list[Mismatch] = attrs.field(factory=list)

    def miss(self, kind: MismatchKind, table: str, row: str, detail: str, *where: str) -> None:
        self.mismatches.append(
            Mismatch(kind, table, row, detail, tuple(f"{w}:{table}{row}" for w in where))
        )

    def _table(self, table: str) -> TableDiff | None:
        return self.diffs.get(table)

    def insert(self, c: Insert) -> None:
        d = self._table(c.table)
        found = 0
        for r in () if d is None else d.inserted:
            if found == c.count:
                break
            if id(r) not in self.used and all(
                k in r and _same(r[k], v) for k, v in c.fields.items()
            ):
                self.used.add(id(r))
                found += 1
        if found < c.count:
            shown = "{" + ", ".join(f"{k}: {v!r}" for k, v in c.fields.items()) + "}"
            self.miss(
                MismatchKind.MISSING_CHANGE,
                c.table,
                "(new)",
                f"expected {c.count} new row(s) holding {shown}, found {found}",
                self.tags[1],
            )

    def _pre_row(self, table: str, key: Mapping[str, Value]) -> Row:
        cols = self.effect.keys.get(table)
        want = _key(key, cols) if cols else _content(key, frozenset())  # type: ignore[arg-type]
        for r in self.pre.rows(table):
            if (_key(r, cols) if cols else _content(r, frozenset())) == want:
                return r
        raise _FixtureError(f"the pre-snapshot of {table!r} has no row {_desc(key, cols)}")

    def _observed(self, table: str, row: Row) -> tuple[str, Row | None, tuple[str, ...]]:
        """How ``row`` (a pre row) fared: 'same', 'updated' (its after, fields) or 'deleted'."""
        d = self._table(table)
        if d is not None:
            for b, a, fields in d.updated:
                if b is row:
                    self.used.add(id(b))
                    return "updated", a, fields
            for r in d.deleted:
                if id(r) not in self.used and (r is row or (d.key is None and r == row)):
                    self.used.add(id(r))
                    return "deleted", None, ()
        return "same", row, ()

    def update(self, c: Update) -> None:
        cols = self.effect.keys.get(c.table)
        before = self._pre_row(c.table, c.key)
        for f, v in c.before.items():
            if not _same(before.get(f, _MISSING), v):
                raise _FixtureError(
                    f"the pre-snapshot's {c.table!r} {_desc(before, cols)} holds "
                    f"{f}={before.get(f)!r}, not the declared before {v!r}"
                )
        row = _desc(before, cols)
        fate, after, changed = self._observed(c.table, before)
        pre_tag, post_tag = self.tags
        if fate == "deleted":
            self.miss(
                MismatchKind.LOST_ROW, c.table, row, "deleted instead of updated", pre_tag, post_tag
            )
            return
        assert after is not None
        if fate == "same":
            self.miss(MismatchKind.MISSING_CHANGE, c.table, row, "not updated", pre_tag, post_tag)
            return
        for f, want in c.after.items():
            got = after.get(f, _MISSING)
            if not _same(got, want):
                still = " (unchanged)" if f not in changed else ""
                self.miss(
                    MismatchKind.WRONG_VALUE,
                    c.table,
                    row,
                    f"{f} holds {None if got is _MISSING else got!r}{still}, expected {want!r}",
                    post_tag,
                )
        for f in changed:
            if f not in c.after:
                self.miss(
                    MismatchKind.WRONG_VALUE,
                    c.table,
                    row,
                    f"{f} changed from {before.get(f)!r} to {after.get(f)!r} and must not change",
                    pre_tag,
                    post_tag,
                )

    def delete(self, c: Delete) -> None:
        before = self._pre_row(c.table, c.key)
        fate, _, _ = self._observed(c.table, before)
        if fate != "deleted":
            self.miss(
                MismatchKind.MISSING_CHANGE,
                c.table,
                _desc(before, self.effect.keys.get(c.table)),
                "still there (expected deleted)",
                *self.tags,
            )

    def leftovers(self) -> None:
        """Every observed change no expected change accounted for."""
        pre_tag, post_tag = self.tags
        for d in self.diffs.values():
            for r in d.inserted:
                if id(r) not in self.used:
                    self.miss(
                        MismatchKind.EXTRA_CHANGE, d.table, _desc(r, d.key), "row added", post_tag
                    )
            for r in d.deleted:
                if id(r) not in self.used:
                    self.miss(
                        MismatchKind.LOST_ROW,
                        d.table,
                        _desc(r, d.key),
                        "row gone",
                        pre_tag,
                        post_tag,
                    )
            for b, a, fields in d.updated:
                if id(b) not in self.used:
                    shown = ", ".join(f"{f}: {b.get(f)!r} -> {a.get(f)!r}" for f in fields)
                    self.miss(
                        MismatchKind.EXTRA_CHANGE,
                        d.table,
                        _desc(b, d.key),
                        f"changed ({shown})",
                        pre_tag,
                        post_tag,
                    )


def _count(changes: Iterable[_Change]) -> int:
    return sum(c.count if isinstance(c, Insert) else 1 for c in changes)


def judge_diff(
    effect: DiffEffect,
    pre: Snapshot,
    post: Snapshot,
    reference: tuple[Snapshot, Snapshot] | None = None,
) -> Verdict:
    """Judge one resolved diff effect; ``reference``: the twin's (pre, post) for a
    reference-mode effect, whose observed diff is then the expected one."""
    if not effect.is_resolved:
        raise InvalidSpec("judge needs a resolved effect: call effect.resolve(trial params) first")

    def indeterminate(reason: str, expected: int = 0) -> Verdict:
        return Verdict(VerdictStatus.INDETERMINATE, TrueState.UNREADABLE, (reason,), None, expected)

    if effect.is_reference:
        if reference is None:
            return indeterminate(
                "a reference diff needs the reference run's snapshots, and none was logged"
            )
        ref_pre, ref_post = reference
        if not ref_pre.readable or not ref_post.readable:
            bad = ref_pre if not ref_pre.readable else ref_post
            return indeterminate(
                f"the reference run's record is unreadable: {bad.error or 'no error given'}"
            )
        changes = expected_from_reference(effect, ref_pre, ref_post)
    else:
        changes = effect.changes
    expected = _count(changes)
    if not post.readable:
        return indeterminate(f"post-state unreadable: {post.error or 'no error given'}", expected)
    if not pre.readable:
        return indeterminate(
            f"a diff needs the pre-state, which is unreadable ({pre.error or 'no error given'})",
            expected,
        )
    observed = observe(effect, pre, post)
    size = sum(d.size for d in observed)
    if size == 0:
        if expected == 0:
            why = (
                "nothing changed, and the expected diff is empty: the record is untouched, as "
                "declared"
            )
            return Verdict(VerdictStatus.CONFIRMED, TrueState.ABSENT, (why,), 0, 0)
        why = f"nothing changed; expected {expected} change(s)"
        return Verdict(VerdictStatus.REFUTED, TrueState.ABSENT, (why,), 0, expected)
    match = _Match(effect, {d.table: d for d in observed}, pre, (PRE, POST))
    try:
        for c in changes:
            if isinstance(c, Insert):
                match.insert(c)
            elif isinstance(c, Update):
                match.update(c)
            else:
                match.delete(c)
    except _FixtureError as exc:
        return indeterminate(f"the task's fixture and its diff disagree: {exc}", expected)
    match.leftovers()
    if match.mismatches:
        found = tuple(match.mismatches)
        return Verdict(
            VerdictStatus.REFUTED,
            TrueState.WRONG_PERSISTED,
            tuple(m.describe() for m in found),
            size,
            expected,
            found,
        )
    why = f"observed exactly the expected {expected} change(s) and nothing else"
    return Verdict(VerdictStatus.CONFIRMED, TrueState.CORRECT, (why,), size, expected)
