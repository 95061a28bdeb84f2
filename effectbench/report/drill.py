"""Episode drill-down: one episode's timeline, report, record diff, verdict and screenshots.

Built from the episode's own events in the log (the results row adds the verdict's
reasons). The diff is the oracle's pre and post rows, matched by the effect's id
field (effectbench.sql_oracle.diff_snapshots); on top of it, each field the effect
contract checks is marked *wrong* where a selected row fails the check, so the field
that made an episode a silent wrong effect stands out.

Screenshots: the scored attempt is replayed as a filmstrip (effectbench.report.filmstrip,
whose ``screenshot_image`` is the one hook that turns a blob into an image; both are
re-exported here).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from effectbench.core.model import DiffEffect
from effectbench.report.data import LOG, EpisodeRef, ReportError
from effectbench.report.filmstrip import (
    SCREENSHOT_BUDGET,
    Filmstrip,
    Screenshot,
    ShotBudget,
    filmstrip,
    screenshot_image,
)
from effectbench.report.sample import DRILL_LIMIT, select_episodes
from effectbench.scoring.diff import describe_diff

__all__ = [
    "DRILL_LIMIT",
    "SCREENSHOT_BUDGET",
    "EpisodeDrill",
    "Screenshot",
    "ShotBudget",
    "collect_events",
    "drill",
    "screenshot_image",
    "select_episodes",
]

ROW_LIMIT: Final = 40
"""Rows shown per table of a diff (changed rows first); the rest are counted."""


# --------------------------------------------------------------------------- the log


def collect_events(
    run_dir: Path, wanted: Iterable[str], expect_hash: str | None, expect_count: int | None
) -> dict[str, list[Any]]:
    """The log's events of the wanted episodes, after checking the log is the one the
    artifacts were built from.

    The artifacts came from a verified log, so this does not re-verify the whole chain
    (`effectbench verify` does; here it would be most of the build time). It checks
    what the page shows instead: the link of every line it parses and of the line
    after it (so a shown line cannot be edited without breaking a checked link), and
    the log's event count and final hash against the manifest's (so the chain cannot
    be rewritten either). Lines of other episodes are only split, never parsed."""
    path = run_dir / LOG
    keys = {b',"ep":' + orjson.dumps(ep) + b',"data":': ep for ep in wanted}
    out: dict[str, list[Any]] = {ep: [] for ep in sorted(keys.values())}
    try:
        count, last_hash = _scan(path, keys, out)
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror or exc}") from None
    if (expect_hash is not None and last_hash != expect_hash) or (
        expect_count is not None and count != expect_count
    ):
        raise ReportError(
            f"{path} is not the log manifest.json was built from (final hash or event "
            f"count differs); rebuild the artifacts with `effectbench rescore {run_dir}`"
        )
    return out


_CHUNK: Final = 1 << 22
_HEAD: Final = b',"h":"'


def _scan(path: Path, keys: Mapping[bytes, str], out: dict[str, list[Any]]) -> tuple[int, str]:
    """(complete lines, last stored hash); wanted lines parsed into ``out``."""
    from effectbench.log.reader import GENESIS_HASH, LoggedEvent

    sha256 = hashlib.sha256
    prev = GENESIS_HASH.encode()
    check_next = False
    n = 0
    tail = b""
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                h = line[-66:-2]
                if line[-72:-66] != _HEAD:
                    raise _bad(path, n + 1, "is not an event line")
                start = line.find(b',"ep":')
                stop = line.find(b',"data":', start)
                ep = keys.get(line[start : stop + 8]) if start > 0 and stop > 0 else None
                linked = ep is None and not check_next
                if not linked and sha256(prev + b"\n" + line[:-72]).hexdigest().encode() != h:
                    raise _bad(path, n + 1, "does not chain from the previous line")
                check_next = ep is not None
                if ep is not None:
                    try:
                        obj = orjson.loads(line)
                        out[ep].append(
                            LoggedEvent(obj["seq"], obj["type"], obj["ts"], ep, obj["data"], n + 1)
                        )
                    except (orjson.JSONDecodeError, KeyError, TypeError):
                        raise _bad(path, n + 1, "is not a valid event") from None
                prev = h
                n += 1
    return n, prev.decode("ascii")


def _bad(path: Path, line_no: int, what: str) -> ReportError:
    return ReportError(
        f"{path} line {line_no} {what}; run `effectbench verify {path.parent}` for every problem"
    )


# --------------------------------------------------------------------------- values


@attrs.frozen
class Field:
    """One field of a diffed row. ``state``: same, added, changed or removed."""

    name: str
    value: str
    state: str
    before: str | None = None
    wrong: bool = False
    expected: str | None = None


@attrs.frozen
class RowView:
    """One row of the diff. ``state``: added, changed, removed or same."""

    state: str
    key: str | None
    fields: tuple[Field, ...]
    selected: bool
    """The effect's selector picks this row (the rows the contract's checks look at)."""


@attrs.frozen
class TableView:
    name: str
    rows: tuple[RowView, ...]
    hidden: int
    added: int
    changed: int
    removed: int


@attrs.frozen
class DiffView:
    tables: tuple[TableView, ...]
    note: str | None
    """Why there is no diff (an unreadable read, no reads), else None."""


@attrs.frozen
class Step:
    """One timeline entry: the event and a one-line account of its data."""

    seq: int
    t_ms: float
    type: str
    text: str


@attrs.frozen
class EpisodeDrill:
    anchor: str
    episode_id: str
    arm: str
    task_id: str
    trial: int
    label: str
    true_state: str | None
    reported_success: bool | None
    halted: bool | None
    message: str | None
    reasons: tuple[str, ...]
    effect: tuple[str, ...]
    timeline: tuple[Step, ...]
    diff: DiffView
    screenshots: tuple[Screenshot, ...]
    """The scored attempt's images, in log order (the filmstrip's frames that have one)."""
    filmstrip: Filmstrip | None
    """The scored attempt replayed, or None when it logged no screenshot."""


# --------------------------------------------------------------------------- one episode


def _short(value: Any, limit: int = 160) -> str:
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _nullable(name: str, value: Any) -> str:
    return f"{name} {'no source' if value is None else value}"


def _step_text(ev: Any) -> str:
    d = ev.data if isinstance(ev.data, Mapping) else {}
    t = ev.type
    if t in ("episode.pre_snapshot", "episode.post_read"):
        snap = d.get("snapshot") or {}
        if not snap.get("readable"):
            return f"attempt {d.get('attempt')}: unreadable ({snap.get('error')})"
        tables = snap.get("tables") or {}
        rows = sum(len(r) for r in tables.values() if isinstance(r, list))
        return f"attempt {d.get('attempt')}: {rows} row(s) in {len(tables)} table(s)"
    if t == "episode.planned":
        return f"trial {d.get('trial')}, params {_short(d.get('params'))}"
    if t == "episode.action":
        return f"{d.get('kind')} {_short(d.get('detail'))}"
    if t == "episode.telemetry":
        parts = [
            _nullable(n, d.get(n))
            for n in ("model_calls", "input_tokens", "output_tokens", "cost_usd")
        ]
        return ", ".join([*parts, f"actions {d.get('actions')}"])
    if t == "episode.reported":
        return (
            f"reported_success {d.get('reported_success')}, halted {d.get('halted')}, "
            f"wall {_ms(d.get('wall_ms'))}"
        )
    if t == "episode.provisioned":
        return f"setup {_ms(d.get('setup_ms'))}"
    if t == "episode.failed":
        return f"{d.get('failure_class')} at {d.get('stage')}: {d.get('error')}"
    return _short(d) if d else ""


def _ms(v: Any) -> str:
    return "no source" if v is None else f"{float(v):.1f} ms"


@attrs.define
class _Attempt:
    """The live attempt's events, as the episode projection folds them."""

    planned: Any = None
    pre: Any = None
    post: Any = None
    reported: Any = None

    def add(self, ev: Any) -> None:
        t = ev.type
        if t == "episode.planned":
            self.planned, self.pre, self.post, self.reported = ev, None, None, None
        elif t == "episode.abandoned":
            self.pre = self.post = self.reported = None
        elif t == "episode.pre_snapshot":
            self.pre = ev
        elif t == "episode.post_read":
            self.post = ev
        elif t == "episode.reported":
            self.reported = ev


def drill(
    ref: EpisodeRef,
    row: Mapping[str, Any],
    events: Sequence[Any],
    run_dir: Path,
    budget: ShotBudget,
) -> EpisodeDrill:
    """The drill-down of one episode from its events and its results row."""
    attempt = _Attempt()
    for ev in events:
        attempt.add(ev)
    t0 = events[0].ts if events else 0.0
    timeline = tuple(
        Step(ev.seq, round((ev.ts - t0) * 1000.0, 1), ev.type, _step_text(ev)) for ev in events
    )
    effect = _effect(attempt.planned)
    rep = attempt.reported.data if attempt.reported is not None else {}
    strip = filmstrip(events, run_dir, budget)
    shots = () if strip is None else tuple(f.shot for f in strip.frames if f.seq is not None)
    return EpisodeDrill(
        anchor=f"ep{ref.slot}",
        episode_id=ref.episode_id,
        arm=ref.arm,
        task_id=ref.task_id,
        trial=ref.trial,
        label=ref.label,
        true_state=row.get("true_state"),
        reported_success=rep.get("reported_success"),
        halted=rep.get("halted"),
        message=rep.get("message"),
        reasons=tuple(str(r) for r in row.get("verdict_reasons") or ()),
        effect=_effect_lines(effect),
        timeline=timeline,
        diff=_diff(attempt, effect),
        screenshots=shots,
        filmstrip=strip,
    )


def _effect(planned: Any) -> Any:
    if planned is None:
        return None
    from effectbench.core.codec import structure_effect_resolved

    data = planned.data
    try:
        return structure_effect_resolved(data.get("effect"), data.get("params") or {})
    except Exception:  # noqa: BLE001 - a contract the log cannot rebuild is shown as absent
        return None


def _effect_lines(effect: Any) -> tuple[str, ...]:
    if effect is None:
        return ("the effect contract could not be read from episode.planned",)
    if isinstance(effect, DiffEffect):
        return describe_diff(effect)
    rw = effect.record_written
    lines = [
        f"{rw.expected_count} row(s) in {rw.table!r} matching {_short(dict(rw.selector))}"
        + (" (new only)" if rw.count_new_only else "")
    ]
    lines += [f"field {fe.field!r} = {_short(fe.expected)}" for fe in effect.field_equals]
    if rw.idempotency_key is not None:
        lines.append(f"idempotency key {rw.idempotency_key[0]!r} = {_short(rw.idempotency_key[1])}")
    return tuple(lines)


def _diff(attempt: _Attempt, effect: Any) -> DiffView:
    from effectbench.core.codec import structure_snapshot
    from effectbench.oracles.sqlite import diff_snapshots

    if attempt.pre is None or attempt.post is None:
        return DiffView((), "no pre and post read were recorded for this attempt")
    try:
        pre = structure_snapshot(attempt.pre.data.get("snapshot"))
        post = structure_snapshot(attempt.post.data.get("snapshot"))
    except (KeyError, TypeError, ValueError) as exc:
        return DiffView((), f"a snapshot in the log cannot be read ({exc})")
    if not pre.readable or not post.readable:
        side, snap = ("pre", pre) if not pre.readable else ("post", post)
        return DiffView((), f"the {side} read was unreadable: {snap.error or 'no error given'}")
    id_fields = (
        None
        if effect is None or isinstance(effect, DiffEffect)
        else {effect.record_written.table: effect.record_written.id_field}
    )
    changes = diff_snapshots(pre, post, id_fields=id_fields)
    tables = []
    for name in sorted({*pre.tables, *post.tables}):
        td = changes.tables.get(name)
        tables.append(_table(name, td, post.rows(name), effect))
    return DiffView(tuple(tables), None)


def _table(name: str, td: Any, post_rows: Sequence[Mapping[str, Any]], effect: Any) -> TableView:
    rows: list[RowView] = []
    touched: set[bytes] = set()
    if td is not None:
        for r in td.added:
            rows.append(_row("added", r, None, name, effect, td.id_field))
            touched.add(_key(r))
        for c in td.changed:
            rows.append(_row("changed", c.after, c.before, name, effect, td.id_field))
            touched.add(_key(c.after))
        for r in td.removed:
            rows.append(_row("removed", r, None, name, effect, td.id_field))
    for r in post_rows:
        if _key(r) not in touched:
            rows.append(_row("same", r, None, name, effect, td.id_field if td else None))
    shown = rows[:ROW_LIMIT]
    return TableView(
        name=name,
        rows=tuple(shown),
        hidden=len(rows) - len(shown),
        added=0 if td is None else len(td.added),
        changed=0 if td is None else len(td.changed),
        removed=0 if td is None else len(td.removed),
    )


def _key(row: Mapping[str, Any]) -> bytes:
    return orjson.dumps(dict(row), option=orjson.OPT_SORT_KEYS)


def _checks(effect: Any, table: str, row: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(does the selector pick the row, field -> expected value for each check it fails)."""
    from effectbench.scoring.judge import row_matches, same_value

    if effect is None or isinstance(effect, DiffEffect) or effect.record_written.table != table:
        return False, {}
    rw = effect.record_written
    if not row_matches(row, rw.selector):
        return False, {}
    wrong: dict[str, Any] = {}
    for fe in effect.field_equals:
        if fe.field not in row or not same_value(row[fe.field], fe.expected):
            wrong[fe.field] = fe.expected
    if rw.idempotency_key is not None:
        col, want = rw.idempotency_key
        if col not in row or not same_value(row[col], want):
            wrong[col] = want
    return True, wrong


def _row(
    state: str,
    row: Mapping[str, Any],
    before: Mapping[str, Any] | None,
    table: str,
    effect: Any,
    id_field: str | None,
) -> RowView:
    selected, wrong = (False, {}) if state == "removed" else _checks(effect, table, row)
    names = list(row)
    if before is not None:
        names += [n for n in before if n not in row]
    fields = []
    for n in names:
        value = _short(row.get(n)) if n in row else ""
        if state == "changed" and before is not None:
            if n not in row:
                fstate, prev = "removed", _short(before.get(n))
            elif n not in before:
                fstate, prev = "added", None
            elif _short(before[n]) != value:
                fstate, prev = "changed", _short(before[n])
            else:
                fstate, prev = "same", None
        else:
            fstate, prev = (state if state in ("added", "removed") else "same"), None
        fields.append(
            Field(n, value, fstate, prev, n in wrong, _short(wrong[n]) if n in wrong else None)
        )
    for n, want in wrong.items():
        if n not in row:
            fields.append(Field(n, "(missing)", "same", None, True, _short(want)))
    key = None if id_field is None or id_field not in row else _short(row[id_field])
    return RowView(state, key, tuple(fields), selected)
