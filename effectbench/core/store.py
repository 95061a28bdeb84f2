"""The audit's write handle on a system of record (the oracle mutation audit).

An oracle reads the record; the mutation audit must also *change* it, directly, to see
whether the oracle notices (docs/audit.md, "The mutation audit"). ``RecordStore`` is the
small protocol it needs: list the tables, list a table's rows, and update, delete or
insert one row. Only the harness holds it, on a twin nobody else drives; an arm never
receives it.

``effectbench.oracles.sqlite_store.SqliteStore`` (any SQLite file; the generic
``SqliteAllTablesOracle`` gets it for free) and
``effectbench.postgres.store.PostgresStore`` (a PostgreSQL database, through a
role that may write) implement it. A provider with its own store sets
``ProvisionedEpisode.store`` to an object with these five methods.

A store that can also give back a state it saved (``RestorableStore``: ``save`` and
``restore``; ``SqliteStore`` can) lets the audit run the reference once and put the
store back between mutations, instead of provisioning a twin and running the reference
again for each one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

import attrs

from effectbench.core.errors import EffectBenchError
from effectbench.core.model import JSONScalar, Row

__all__ = [
    "Locator",
    "RecordStore",
    "RestorableStore",
    "StoreRefused",
    "StoredRow",
    "StoredTable",
]

Locator: TypeAlias = str | int
"""Names exactly one row of a table, as long as the row exists (SQLite's rowid, a
PostgreSQL ctid, a provider's own id). Opaque to the audit."""


class StoreRefused(EffectBenchError):
    """The store refused a mutation (a constraint, a type it cannot hold): the state it
    asked for cannot exist, so that mutation is skipped, not counted."""


@attrs.frozen
class StoredTable:
    """One table as the store holds it: its name, its primary-key columns (empty: none)
    and its declared references (column -> (table, column))."""

    name: str
    key: tuple[str, ...] = ()
    references: Mapping[str, tuple[str, str]] = attrs.field(factory=dict)


@attrs.frozen
class StoredRow:
    """One row: where it is (``locator``) and its values as JSON scalars."""

    locator: Locator
    values: Row


@runtime_checkable
class RecordStore(Protocol):
    """Direct access to a system of record for the mutation audit. Every method may
    raise ``StoreRefused`` (or any exception) when the store refuses the change."""

    async def tables(self) -> Sequence[StoredTable]:
        """Every table the store holds, discovered from the store itself."""
        ...

    async def rows(self, table: str) -> Sequence[StoredRow]:
        """Every row of ``table``, in a stable order."""
        ...

    async def update(self, table: str, locator: Locator, values: Mapping[str, JSONScalar]) -> None:
        """Set ``values`` (column -> value) on the one row ``locator`` names."""
        ...

    async def delete(self, table: str, locator: Locator) -> None:
        """Remove the one row ``locator`` names."""
        ...

    async def insert(self, table: str, values: Mapping[str, JSONScalar]) -> None:
        """Add a row holding ``values`` (columns not named take their defaults)."""
        ...


@runtime_checkable
class RestorableStore(Protocol):
    """A store that can put back a state it saved (optional, beside ``RecordStore``)."""

    async def save(self) -> bytes:
        """The whole stored state now, as an opaque value ``restore`` takes back."""
        ...

    async def restore(self, saved: bytes) -> None:
        """Make the store hold exactly the state ``saved`` (from ``save``) again."""
        ...
