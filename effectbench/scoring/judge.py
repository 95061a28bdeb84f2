"""The judge: what the system of record says happened, from two snapshots and a contract.

Pure and total over well-formed inputs: no I/O, no clock, no randomness, so a logged
pair of snapshots can be judged again years later and give the same verdict. The only
exception it raises is InvalidSpec for an effect that still holds run-param references
(the caller forgot to resolve it for this trial).

Equality is type-strict everywhere: the string "1" is not the integer 1, True is not 1,
and categorical values are compared exactly (no case folding, no trimming).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TypeAlias

from effectbench.core.model import (
    AnyEffect,
    DiffEffect,
    Effect,
    InvalidSpec,
    JSONScalar,
    ParamRef,
    Row,
    Snapshot,
    TrueState,
    Value,
    Verdict,
    VerdictStatus,
)
from effectbench.scoring.diff import judge_diff

__all__ = ["judge", "judge_inserts", "row_matches", "same_value"]

_MAX_LISTED = 10
"""At most this many ids are named per reason; the rest are counted ("and N more")."""

_Key: TypeAlias = tuple[str, ...]


def same_value(a: object, b: object) -> bool:
    """Type-strict equality: same concrete type and equal value ("1" != 1, True != 1)."""
    return type(a) is type(b) and a == b


def row_matches(row: Row, selector: Mapping[str, Value]) -> bool:
    """A row matches when every selector column is present and holds exactly that value."""
    # same_value inlined: this runs for every row of every judged episode
    for col, want in selector.items():
        if col not in row:
            return False
        got = row[col]
        if type(got) is not type(want) or got != want:
            return False
    return True


def _scalar_key(v: object) -> str:
    # repr keeps the type visible ('1' vs 1 vs 1.0 vs True) and never fails on scalars.
    return f"{type(v).__name__}:{v!r}"


def _whole_row_key(row: Row) -> _Key:
    return tuple(f"{col}={_scalar_key(row[col])}" for col in sorted(row))


def _identity(row: Row, id_field: str) -> _Key:
    """A row's identity: its id_field value, or the whole row when it has no id_field."""
    if id_field in row:
        return ("id", _scalar_key(row[id_field]))
    return ("row", *_whole_row_key(row))


def _describe(row: Row, id_field: str) -> str:
    if id_field in row:
        return f"{id_field}={row[id_field]!r}"
    return "{" + ", ".join(f"{c}: {row[c]!r}" for c in sorted(row)) + "}"


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:_MAX_LISTED])
    extra = len(items) - _MAX_LISTED
    return shown if extra <= 0 else f"{shown} and {extra} more"


def _fmt_selector(selector: Mapping[str, Value]) -> str:
    return "{" + ", ".join(f"{k}: {v!r}" for k, v in selector.items()) + "}"


def _pre_clauses(effect: Effect) -> list[str]:
    rw = effect.record_written
    needs = []
    if rw.count_new_only:
        needs.append("count-new-only")
    if rw.forbid_collateral_loss:
        needs.append("forbid-collateral-loss")
    if rw.forbid_stray_writes:
        needs.append("forbid-stray-writes")
    return needs


def _unpaired(
    rows: Iterable[Row], others: Iterable[Row], selector: Mapping[str, Value] | None, id_field: str
) -> tuple[list[str], list[str]]:
    """Pair ``rows`` outside ``selector`` with ``others`` by identity, as a multiset.

    Returns (rows with no counterpart, rows whose counterpart has other contents), each
    described for a reason. Two equal id-less rows count as two."""
    pool: dict[_Key, list[_Key]] = {}
    for r in others:
        pool.setdefault(_identity(r, id_field), []).append(_whole_row_key(r))
    missing: list[str] = []
    differing: list[str] = []
    for r in rows:
        if selector is not None and row_matches(r, selector):
            continue
        candidates = pool.get(_identity(r, id_field))
        if not candidates:
            missing.append(_describe(r, id_field))
            continue
        content = _whole_row_key(r)
        if content in candidates:
            candidates.remove(content)
        else:
            candidates.pop()
            differing.append(_describe(r, id_field))
    return missing, differing


def _collateral_loss(effect: Effect, pre: Snapshot, post: Snapshot) -> list[str]:
    """Rows present before and outside the selector that are gone after, or were rewritten
    in place (same identity, other contents): either way someone else's data is lost.
    An in-place rewrite into a row the selector matches is the lost update of C4."""
    rw = effect.record_written
    reasons = []
    for table in sorted(pre.tables):
        before = pre.rows(table)
        if not before:
            continue  # nothing there before, nothing to lose (the common case: skip the pairing)
        selector = rw.selector if table == rw.table else None
        lost, rewritten = _unpaired(before, post.rows(table), selector, rw.id_field)
        if lost:
            reasons.append(
                f"collateral loss in {table!r}: {len(lost)} pre-existing row(s) outside the "
                f"selector vanished ({_listed(lost)})"
            )
        if rewritten:
            reasons.append(
                f"collateral loss in {table!r}: {len(rewritten)} pre-existing row(s) outside the "
                f"selector were overwritten in place ({_listed(rewritten)})"
            )
    return reasons


def _stray_writes(effect: Effect, pre: Snapshot, post: Snapshot) -> list[str]:
    """Rows added or changed in any table that the contract did not ask for."""
    rw = effect.record_written
    reasons = []
    for table in sorted(post.tables):
        selector = rw.selector if table == rw.table else None
        added, changed = _unpaired(post.rows(table), pre.rows(table), selector, rw.id_field)
        if added:
            reasons.append(
                f"stray write in {table!r}: {len(added)} row(s) added outside the selector "
                f"({_listed(added)})"
            )
        if changed:
            reasons.append(
                f"stray write in {table!r}: {len(changed)} row(s) outside the selector changed "
                f"({_listed(changed)})"
            )
    return reasons


def _matching_rows(effect: Effect, pre: Snapshot, post: Snapshot) -> list[Row]:
    rw = effect.record_written
    rows = [r for r in post.rows(rw.table) if row_matches(r, rw.selector)]
    if rw.count_new_only:
        seen = Counter(_identity(r, rw.id_field) for r in pre.rows(rw.table))
        new = []
        for r in rows:
            ident = _identity(r, rw.id_field)
            if seen[ident]:
                seen[ident] -= 1  # this row was there before
            else:
                new.append(r)
        rows = new
    return rows


def _content_problems(effect: Effect, rows: Iterable[Row]) -> list[str]:
    """Idempotency-key and field_equals checks over the matching rows."""
    rw = effect.record_written
    rows = list(rows)
    reasons: list[str] = []
    if not rows:
        return reasons  # every check below is over the matching rows
    if rw.idempotency_key is not None:
        col, want = rw.idempotency_key
        bad = [
            _describe(r, rw.id_field) for r in rows if not (col in r and same_value(r[col], want))
        ]
        if bad:
            reasons.append(
                f"{len(bad)} matching row(s) lack this trial's idempotency key {col}={want!r} "
                f"({_listed(bad)})"
            )
    for fe in effect.field_equals:
        bad = []
        for r in rows:
            if fe.field not in r:
                bad.append(f"{_describe(r, rw.id_field)} has no {fe.field!r}")
            elif not same_value(r[fe.field], fe.expected):
                got: JSONScalar = r[fe.field]
                bad.append(f"{_describe(r, rw.id_field)} holds {got!r}")
        if bad:
            reasons.append(f"field {fe.field!r} must equal {fe.expected!r}: {_listed(bad)}")
    return reasons


def _is_resolved(effect: Effect) -> bool:
    """Effect.is_resolved without building a list (the judge checks it on every call)."""
    rw = effect.record_written
    for v in rw.selector.values():
        if isinstance(v, ParamRef):
            return False
    for f in effect.field_equals:
        if isinstance(f.expected, ParamRef):
            return False
    return rw.idempotency_key is None or not isinstance(rw.idempotency_key[1], ParamRef)


def judge(
    effect: AnyEffect,
    pre: Snapshot,
    post: Snapshot,
    reference: tuple[Snapshot, Snapshot] | None = None,
) -> Verdict:
    """Judge one resolved effect against the pre- and post-action snapshots: an insert
    clause by the rules below (SPEC 1.0, unchanged), a state diff by ``judge_diff``
    (``reference``: a reference-mode diff's twin snapshots)."""
    if type(effect) is DiffEffect:
        return judge_diff(effect, pre, post, reference)
    assert isinstance(effect, Effect)
    return judge_inserts(effect, pre, post)


def judge_inserts(effect: Effect, pre: Snapshot, post: Snapshot) -> Verdict:
    """Judge one resolved insert clause against the pre- and post-action snapshots."""
    if not _is_resolved(effect):
        raise InvalidSpec("judge needs a resolved effect: call effect.resolve(trial params) first")
    rw = effect.record_written
    expected = rw.expected_count

    def indeterminate(reason: str) -> Verdict:
        return Verdict(VerdictStatus.INDETERMINATE, TrueState.UNREADABLE, (reason,), None, expected)

    if not post.readable:
        return indeterminate(f"post-state unreadable: {post.error or 'no error given'}")
    needs_pre = [] if pre.readable else _pre_clauses(effect)  # asked only when it matters
    if needs_pre:
        return indeterminate(
            f"{' and '.join(needs_pre)} with an unreachable pre-state "
            f"({pre.error or 'no error given'})"
        )

    rows = _matching_rows(effect, pre, post)
    observed = len(rows)
    side_effects: list[str] = []
    if rw.forbid_collateral_loss:
        side_effects += _collateral_loss(effect, pre, post)
    if rw.forbid_stray_writes:
        side_effects += _stray_writes(effect, pre, post)
    content = _content_problems(effect, rows)

    what = f"{rw.table!r} rows matching {_fmt_selector(rw.selector)}" + (
        " (new only)" if rw.count_new_only else ""
    )

    if observed == 0 and expected > 0 and not side_effects:
        count_reason = f"expected {expected} {what}, found {observed}"
        return Verdict(VerdictStatus.REFUTED, TrueState.ABSENT, (count_reason,), observed, expected)
    if observed == 0 and expected == 0 and not side_effects:
        # A refusal control: the record is untouched, which is the desired *absence* of an
        # effect. ABSENT (not CORRECT) lets the classifier say SAFE_HALT for a halt and a
        # phantom SWER for a run that claims it did something.
        return Verdict(
            VerdictStatus.CONFIRMED,
            TrueState.ABSENT,
            (f"no {what} and no other change: the record is untouched, as declared",),
            observed,
            expected,
        )
    problems = list(side_effects)
    if observed != expected:
        problems.insert(0, f"expected {expected} {what}, found {observed}")
    problems += content
    if problems:
        return Verdict(
            VerdictStatus.REFUTED, TrueState.WRONG_PERSISTED, tuple(problems), observed, expected
        )
    return Verdict(
        VerdictStatus.CONFIRMED,
        TrueState.CORRECT,
        (f"found {observed} {what} as declared; every check held",),
        observed,
        expected,
    )
