"""What a verifying arm can confirm on a reference-mode task, whose expected diff it never sees.

A reference-mode diff (SPEC 5.4) takes its expected changes from a reference program run
on a twin the arm cannot reach; the task view carries only the diff's keys and
allow-list. The judge is therefore no use to the arm there (it answers UNREADABLE with no
twin reads), and halting on every such task would turn each correct save into a
FALSE_ABORT. What the arm *can* check in the product's readback is that the change landed
and that its own submission accounts for every part of it:

- something changed outside the allow-list;
- every payload value (``params``) is now held by a new row or a changed field;
- every changed row is one the submission named (its key values are submitted values),
  and every changed field now holds a submitted value;
- every removed row is one the submission named;
- every new row holds at least one submitted value outside its key;
- every submitted value is in the change, counting what the allow-list lets the product
  move (the audit row an action leaves, say): a save that wrote one table of two leaves
  part of the submission nowhere.

Values compare in the form a submission sends them (``str``; None is empty), since the
product stores what the form gave it. A change the reference program would not make, but
that the submission accounts for, passes: this is weaker than judging a declared diff,
and docs/writing-an-arm.md says so.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from effectbench.core.model import DiffEffect, JSONScalar, Row, Snapshot
from effectbench.scoring.diff import ObservedDiff, observe

__all__ = ["form_value", "own_change"]


def form_value(value: object) -> str:
    """A value as a form submission carries it."""
    return "" if value is None else str(value)


def _named(row: Row, cols: tuple[str, ...] | None, sent: set[str]) -> bool:
    """Whether the submission names ``row``: its key values (a key-less table's: any of
    its values) are among the submitted ones."""
    if cols:
        return all(form_value(row.get(c)) in sent for c in cols)
    return any(form_value(v) in sent for v in row.values())


def _values(diff: ObservedDiff) -> set[str]:
    """Every value a change holds: new rows', gone rows', and changed rows' keys and new
    field values."""
    out: set[str] = set()
    for d in diff:
        for r in (*d.inserted, *d.deleted):
            out |= {form_value(v) for v in r.values()}
        for b, a, fields in d.updated:
            out |= {form_value(b.get(c)) for c in d.key or ()}
            out |= {form_value(a.get(f)) for f in fields}
    return out


def own_change(
    effect: DiffEffect,
    solution: Mapping[str, JSONScalar] | None,
    params: Mapping[str, str],
    before: Snapshot,
    after: Snapshot,
) -> tuple[bool, str]:
    """(confirmed, why): whether the readback's change from ``before`` to ``after`` is
    exactly one the submission ``solution`` accounts for (module docstring)."""
    if not before.readable or not after.readable:
        bad = before if not before.readable else after
        return False, f"the readback is unreadable: {bad.error or 'no error given'}"
    sent = {form_value(v) for v in (solution or {}).values()} - {""}
    landed: set[str] = set()
    problems: list[str] = []
    observed = observe(effect, before, after)
    for d in observed:
        for r in d.inserted:
            values = {form_value(v) for c, v in r.items() if c not in (d.key or ())}
            landed |= values
            if not values & sent:
                problems.append(f"a new row in {d.table!r} holds nothing it submitted")
        for b, a, fields in d.updated:
            landed |= {form_value(a.get(f)) for f in fields}
            if not _named(b, d.key, sent):
                problems.append(f"a row of {d.table!r} it did not name changed")
            stray = [f for f in fields if form_value(a.get(f)) not in sent]
            if stray:
                problems.append(f"{d.table!r} fields it did not set changed: {', '.join(stray)}")
        for r in d.deleted:
            if not _named(r, d.key, sent):
                problems.append(f"a row of {d.table!r} it did not name is gone")
    if not observed:
        return False, "nothing changed in the readback"
    missing = sorted(k for k, v in params.items() if v not in landed)
    if missing:
        problems.append(f"the payload ({', '.join(missing)}) is in no changed row")
    everything = _values(observe(attrs.evolve(effect, allow=()), before, after))
    unsaved = sorted(
        k for k, v in (solution or {}).items() if form_value(v) and form_value(v) not in everything
    )
    if unsaved:
        problems.append(f"what it submitted as {', '.join(unsaved)} is in no change")
    if problems:
        return False, "; ".join(problems)
    changes = sum(d.size for d in observed)
    return True, f"{changes} change(s), each accounted for by its own submission"
