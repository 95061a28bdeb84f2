"""A generic oracle for any SQLite system of record: read every table, read-only.

A verifier that reads only the record it expects to change cannot see a stray
write to some other table. This oracle discovers every user table from the
schema on each read, so a provider gets a full read path without naming its
tables, and ``diff_snapshots`` / ``outside_effect`` turn two such reads into the
rows added, changed and removed outside the declared effect.

The read path is separate from anything an arm holds: each read opens its own
``mode=ro`` URI connection (writes through it fail), reads all tables inside one
read transaction (a consistent cut across tables) and closes it, so no open
transaction or cursor survives to pin a stale snapshot.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import anyio.to_thread
import attrs
import orjson

from effectbench.core.model import Effect, JSONScalar, ParamRef, Row, Snapshot
from effectbench.oracles.digest import SnapshotScope

BUSY_TIMEOUT_S: Final = 5.0
"""How long one read waits on a writer's lock before reporting the store unreadable."""


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _scalar(value: object) -> JSONScalar:
    """SQLite values as JSON scalars; a BLOB becomes its lowercase hex string."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def ro_uri(db_path: str | os.PathLike[str]) -> str:
    """The read-only URI for a database file (percent-encoded, absolute)."""
    return Path(db_path).resolve().as_uri() + "?mode=ro"


def connect_ro(
    db_path: str | os.PathLike[str], *, timeout: float = BUSY_TIMEOUT_S
) -> sqlite3.Connection:
    """A read-only, autocommit connection; ``mode=ro`` never creates a missing file."""
    conn = sqlite3.connect(ro_uri(db_path), uri=True, timeout=timeout, isolation_level=None)
    conn.execute("PRAGMA query_only = ON")
    return conn


def user_tables(conn: sqlite3.Connection) -> list[str]:
    """Every user table in the schema, by name; SQLite's internal tables are skipped."""
    cur = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
        "ESCAPE '\\' ORDER BY name"
    )
    try:
        return [str(r[0]) for r in cur.fetchall()]
    finally:
        cur.close()


def _read_table(conn: sqlite3.Connection, table: str) -> tuple[Row, ...]:
    q = _quote_ident(table)
    try:
        cur = conn.execute(f"SELECT * FROM {q} ORDER BY rowid")
    except sqlite3.OperationalError:
        # A WITHOUT ROWID table: order by every column for a deterministic read.
        cur = conn.execute(f"SELECT * FROM {q}")
        cols = len(cur.description or ())
        cur.close()
        order = ", ".join(str(i) for i in range(1, cols + 1)) or "1"
        cur = conn.execute(f"SELECT * FROM {q} ORDER BY {order}")
    try:
        names = [d[0] for d in (cur.description or ())]
        return tuple(
            {n: _scalar(v) for n, v in zip(names, row, strict=True)} for row in cur.fetchall()
        )
    finally:
        cur.close()


def read_all_tables(
    db_path: str | os.PathLike[str],
    *,
    timeout: float = BUSY_TIMEOUT_S,
    scope: SnapshotScope | None = None,
) -> Snapshot:
    """Blocking read of every user table; an unreachable store gives an unreadable Snapshot.
    ``scope``: the tables outside it come back digested row by row (oracles/digest.py)."""
    try:
        conn = connect_ro(db_path, timeout=timeout)
    except sqlite3.Error as exc:
        return Snapshot.unreadable(f"cannot open {db_path} read-only: {exc}")
    try:
        conn.execute("BEGIN")
        try:
            tables = {name: _read_table(conn, name) for name in user_tables(conn)}
        finally:
            conn.execute("COMMIT")
        return Snapshot(readable=True, tables=tables if scope is None else scope.apply(tables))
    except sqlite3.Error as exc:
        return Snapshot.unreadable(f"cannot read {db_path}: {exc}")
    finally:
        conn.close()


def _fspath(path: str | os.PathLike[str]) -> str:
    return os.fspath(path)


@attrs.frozen
class SqliteAllTablesOracle:
    """``effectbench.provider.Oracle`` over one SQLite file: every table, read-only, per read.

    ``scope``: which tables are logged in full; pass ``SnapshotScope.of(task.expected_effect)``
    and every other table is logged as a digest per row (a fraction of the bytes, every
    change still seen and named). The default logs every table in full."""

    db_path: str = attrs.field(converter=_fspath)
    timeout: float = BUSY_TIMEOUT_S
    scope: SnapshotScope = attrs.field(factory=SnapshotScope.everything)

    async def read(self) -> Snapshot:
        return await anyio.to_thread.run_sync(
            lambda: read_all_tables(self.db_path, timeout=self.timeout, scope=self.scope)
        )


# --- pure diffing -----------------------------------------------------------------------------


@attrs.frozen
class RowChange:
    """One row present before and after (matched by its id field) whose values differ."""

    key: JSONScalar
    before: Row
    after: Row


@attrs.frozen
class TableDiff:
    """What happened to one table between two reads. ``id_field`` None: rows matched by content."""

    table: str
    id_field: str | None
    added: tuple[Row, ...] = ()
    changed: tuple[RowChange, ...] = ()
    removed: tuple[Row, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed)


@attrs.frozen
class SnapshotDiff:
    """Per-table changes between a pre and a post read; tables without a change are omitted."""

    tables: Mapping[str, TableDiff] = attrs.field(factory=dict)

    @property
    def empty(self) -> bool:
        return not self.tables

    def describe(self) -> list[str]:
        """One line per changed row, stable order, for reasons and reports."""
        return [line for name in sorted(self.tables) for line in _describe_table(self.tables[name])]


def _describe_table(td: TableDiff, *, where: str = "") -> list[str]:
    return [
        *(f"{td.table}: row added{where} {_compact(r)}" for r in td.added),
        *(
            f"{td.table}: row {td.id_field}={c.key!r} changed{where} {_compact(c.before)} -> "
            f"{_compact(c.after)}"
            for c in td.changed
        ),
        *(f"{td.table}: row removed{where} {_compact(r)}" for r in td.removed),
    ]


def _compact(row: Row) -> str:
    return orjson.dumps(dict(row), option=orjson.OPT_SORT_KEYS).decode()


def _row_key(row: Row) -> bytes:
    return orjson.dumps(dict(row), option=orjson.OPT_SORT_KEYS)


def _pick_id_field(
    table: str, rows: Sequence[Row], id_fields: Mapping[str, str] | None
) -> str | None:
    if id_fields is not None and table in id_fields:
        return id_fields[table]
    if rows and all("id" in r for r in rows):
        return "id"
    return None


def _diff_table(
    table: str, pre: Sequence[Row], post: Sequence[Row], id_field: str | None
) -> TableDiff:
    if id_field is not None:
        keyed = all(id_field in r for r in (*pre, *post))
        pre_ids = [r.get(id_field) for r in pre]
        post_ids = [r.get(id_field) for r in post]
        unique = len(set(map(_key_of, pre_ids))) == len(pre_ids) and len(
            set(map(_key_of, post_ids))
        ) == len(post_ids)
        if keyed and unique:
            before = {_key_of(r.get(id_field)): r for r in pre}
            after = {_key_of(r.get(id_field)): r for r in post}
            added = tuple(r for k, r in after.items() if k not in before)
            removed = tuple(r for k, r in before.items() if k not in after)
            changed = tuple(
                RowChange(key=r.get(id_field), before=before[k], after=r)
                for k, r in after.items()
                if k in before and _row_key(before[k]) != _row_key(r)
            )
            return TableDiff(table, id_field, added, changed, removed)
    # No usable id: compare as multisets of whole rows (a change shows as removed + added).
    remaining: dict[bytes, list[Row]] = {}
    for r in pre:
        remaining.setdefault(_row_key(r), []).append(r)
    added_rows: list[Row] = []
    for r in post:
        bucket = remaining.get(_row_key(r))
        if bucket:
            bucket.pop()
        else:
            added_rows.append(r)
    removed_rows = [r for bucket in remaining.values() for r in bucket]
    return TableDiff(table, None, tuple(added_rows), (), tuple(removed_rows))


def _key_of(value: JSONScalar) -> bytes:
    # 1 and "1" are different keys; 1 and 1.0 are not (as in SQLite's own comparison).
    return orjson.dumps(value)


def diff_snapshots(
    pre: Snapshot, post: Snapshot, *, id_fields: Mapping[str, str] | None = None
) -> SnapshotDiff:
    """Rows added, changed and removed per table between two readable snapshots.

    Rows are matched by ``id_fields[table]``, else by an ``id`` column every row has;
    without a usable unique id they are compared as whole rows, so a modified row
    shows as one removed and one added. A table present on one side only counts as
    all rows added (or removed). Raises ValueError for an unreadable snapshot: there
    is no honest diff against a read that did not happen.
    """
    if not pre.readable or not post.readable:
        side = "pre" if not pre.readable else "post"
        raise ValueError(
            f"cannot diff: the {side} snapshot is unreadable "
            f"({(pre if side == 'pre' else post).error})"
        )
    out: dict[str, TableDiff] = {}
    for table in sorted({*pre.tables, *post.tables}):
        before, after = pre.rows(table), post.rows(table)
        td = _diff_table(table, before, after, _pick_id_field(table, (*before, *after), id_fields))
        if not td.empty:
            out[table] = td
    return SnapshotDiff(tables=out)


def _matches(row: Row, selector: Mapping[str, JSONScalar]) -> bool:
    return all(k in row and row[k] == v for k, v in selector.items())


def outside_effect(diff: SnapshotDiff, effect: Effect) -> list[str]:
    """Changes the declared effect does not cover, one line each (empty: nothing stray).

    Inside the effect: rows of the effect's table that match its selector when added
    or removed, and changed rows that match it both before and after. Everything else
    is outside: any change to another table, a row added or removed that the selector
    does not select, and a row edited into or out of the selection. The effect must be
    resolved (this trial's params substituted).
    """
    if not effect.is_resolved:
        raise ValueError(
            "outside_effect needs a resolved effect: call effect.resolve(params) first"
        )
    rw = effect.record_written
    selector = {k: v for k, v in rw.selector.items() if not isinstance(v, ParamRef)}
    lines: list[str] = []
    for name in sorted(diff.tables):
        td = diff.tables[name]
        if name != rw.table:
            lines += _describe_table(td)
            continue
        stray = TableDiff(
            table=td.table,
            id_field=td.id_field,
            added=tuple(r for r in td.added if not _matches(r, selector)),
            changed=tuple(
                c
                for c in td.changed
                if not (_matches(c.before, selector) and _matches(c.after, selector))
            ),
            removed=tuple(r for r in td.removed if not _matches(r, selector)),
        )
        lines += _describe_table(stray, where=" outside the selector")
    return lines


__all__ = [
    "RowChange",
    "SnapshotDiff",
    "SqliteAllTablesOracle",
    "TableDiff",
    "connect_ro",
    "diff_snapshots",
    "outside_effect",
    "read_all_tables",
    "ro_uri",
    "user_tables",
]
