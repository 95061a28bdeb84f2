"""Snapshot scope: full rows for the tables a task's effect may touch, a digest per row of
the rest.

An all-tables oracle logs every row of every table twice an episode; on a real product
that is mostly stock content no task touches (a 491 KB table made ~1 MB of log per
episode). The judge needs full rows only where the effect looks inside them: the tables
its changes (or its ``record_written``) name. Everywhere else it only asks whether a row
was added, removed or changed, and names the row. So a table outside the scope is logged
row by row as the row's identity columns in clear plus ``"#"``, a digest of every other
column (form ``effectbench.core.versions.ROW_DIGEST_FORM``, docs/event-log.md).

Why per row and not per table: a per-table digest would say *that* a table changed, not
which row, and the judge names the row ("table x: row [id=7] changed"); per row costs the
identity and 32 hex characters, and pairs rows exactly as the full rows did.

The judge gives the same verdict on the digested snapshot as on the full one, because
the digest keeps what it compares: the pairing columns stay in clear (the diff's declared
keys, else ``id``; the insert judge's ``id_field``), the columns the effect's allow-list
lets move are left out of the digest as the judge leaves them out of its comparison, and
the digest is over the values' JSON with their types (``1``, ``1.0``, ``"1"`` and
``true`` differ, as the judge's type-strict comparison has it). A reference-mode diff,
whose changes are observed on a twin, keeps every table in full.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final

import attrs
import orjson

from effectbench.core.effects import AnyEffect, DiffEffect
from effectbench.core.model import JSONScalar, Row

__all__ = ["DIGEST_FIELD", "SnapshotScope", "digest_row"]

DIGEST_FIELD: Final = "#"
"""The column of a digested row that holds the digest of its other columns."""
_HEX: Final = 32


def _canonical(value: JSONScalar) -> JSONScalar:
    # -0.0 == 0.0 for the judge; their JSON differs.
    return 0.0 if isinstance(value, float) and value == 0.0 else value


def digest_row(row: Row, clear: tuple[str, ...], skip: frozenset[str]) -> Row:
    """``row`` as its ``clear`` columns plus the digest of every column in neither."""
    kept = {c: row[c] for c in clear if c in row}
    rest = {c: _canonical(v) for c, v in row.items() if c not in kept and c not in skip}
    text = orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)
    return {**kept, DIGEST_FIELD: hashlib.sha256(text).hexdigest()[:_HEX]}


@attrs.frozen
class SnapshotScope:
    """Which tables an oracle logs in full; every other one is digested row by row.

    ``full`` None: every table in full (what an oracle without a scope logs)."""

    full: frozenset[str] | None
    keys: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    """Per table, the columns kept in clear (the rows' pairing key)."""
    default_key: tuple[str, ...] = ("id",)
    """The clear columns of a table ``keys`` does not name."""
    skip: Mapping[str, frozenset[str]] = attrs.field(factory=dict)
    """Per table, columns left out of the digest (the effect lets the product move them)."""

    @classmethod
    def everything(cls) -> SnapshotScope:
        return cls(full=None)

    @classmethod
    def of(cls, effect: AnyEffect) -> SnapshotScope:
        """The scope of a task's declared effect (resolved or not: tables and keys do not
        depend on the trial's params)."""
        if isinstance(effect, DiffEffect):
            if effect.is_reference:
                return cls.everything()
            return cls(
                full=frozenset(c.table for c in effect.changes),
                keys=dict(effect.keys),
                skip=_allowed_columns(effect),
            )
        rw = effect.record_written
        return cls(full=frozenset({rw.table}), default_key=(rw.id_field,))

    def apply(self, tables: Mapping[str, tuple[Row, ...]]) -> dict[str, tuple[Row, ...]]:
        """The tables as the oracle logs them: in scope as read, the rest digested."""
        if self.full is None:
            return dict(tables)
        out: dict[str, tuple[Row, ...]] = {}
        for name, rows in tables.items():
            if name in self.full:
                out[name] = rows
                continue
            clear = self.keys.get(name, self.default_key)
            skip = self.skip.get(name, frozenset())
            out[name] = tuple(digest_row(r, clear, skip) for r in rows)
        return out


def _allowed_columns(effect: DiffEffect) -> dict[str, frozenset[str]]:
    tables = {entry.split(".", 1)[0] for entry in effect.allow}
    out: dict[str, frozenset[str]] = {}
    for table in tables:
        allowed = effect.allowed_fields(table)
        if allowed:  # None: the whole table is out of the judge; its digest is never compared
            out[table] = allowed
    return out
