"""The mutation audit's write handle on a PostgreSQL database (``effectbench.core.store``).

Tables and primary keys come from the catalog (as the oracle finds them,
``postgres.oracle``), rows are located by ``ctid``, and values are mapped to JSON
exactly as the oracle maps them, so a mutated value reads back as the audit wrote it.
It connects through a DSN that may write (the product's, not the oracle's SELECT-only
role); each call is its own autocommitted statement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from effectbench.core.model import JSONScalar
from effectbench.core.store import Locator, StoredRow, StoredTable, StoreRefused
from effectbench.postgres.oracle import (
    _TABLES,
    CONNECT_TIMEOUT_S,
    SYSTEM_SCHEMAS,
    _adapters,
    _text_array,
    json_value,
    quote_ident,
    table_key,
)

__all__ = ["PostgresStore"]

WRITE_OPTIONS: Final = (
    "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=iso_8601 -c extra_float_digits=1 "
    "-c bytea_output=hex"
)


class PostgresStore:
    """``RecordStore`` over one PostgreSQL database (every non-system schema)."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._layout: dict[str, tuple[str, tuple[str, ...]]] | None = None

    async def _connect(self) -> Any:
        import psycopg

        try:
            return await psycopg.AsyncConnection.connect(
                self._dsn,
                options=WRITE_OPTIONS,
                connect_timeout=CONNECT_TIMEOUT_S,
                context=_adapters(),
                autocommit=True,
            )
        except psycopg.Error as exc:
            raise StoreRefused(f"cannot connect: {' '.join(str(exc).split())}") from None

    async def _execute(self, query: str, args: Sequence[Any] = ()) -> Any:
        import psycopg

        conn = await self._connect()
        try:
            cur = await conn.execute(query, list(args) if args else None)
            rows = await cur.fetchall() if cur.description else []
            names = [d.name for d in cur.description] if cur.description else []
            return names, rows, cur.rowcount
        except psycopg.Error as exc:
            raise StoreRefused(f"{type(exc).__name__}: {' '.join(str(exc).split())}") from None
        finally:
            await conn.close()

    async def _tables(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        if self._layout is None:
            query = _TABLES.format(schemas=_text_array(None), system=_text_array(SYSTEM_SCHEMAS))
            _, rows, _ = await self._execute(query)
            self._layout = {
                table_key(schema, table): (
                    f"{quote_ident(schema)}.{quote_ident(table)}",
                    tuple(pk or ()),
                )
                for schema, table, pk in rows
            }
        return self._layout

    async def _name(self, table: str) -> tuple[str, tuple[str, ...]]:
        layout = await self._tables()
        if table not in layout:
            raise StoreRefused(f"no table {table!r}")
        return layout[table]

    async def tables(self) -> Sequence[StoredTable]:
        return [StoredTable(t, key) for t, (_, key) in sorted((await self._tables()).items())]

    async def rows(self, table: str) -> Sequence[StoredRow]:
        name, key = await self._name(table)
        order = ", ".join(quote_ident(c) for c in key) if key else "t.ctid"
        names, rows, _ = await self._execute(
            f"SELECT t.ctid::text AS ctid__, t.* FROM {name} AS t ORDER BY {order}"
        )
        return [
            StoredRow(str(r[0]), {c: json_value(v) for c, v in zip(names[1:], r[1:], strict=True)})
            for r in rows
        ]

    async def update(self, table: str, locator: Locator, values: Mapping[str, JSONScalar]) -> None:
        name, _ = await self._name(table)
        sets = ", ".join(f"{quote_ident(c)} = %s" for c in values)
        _, _, count = await self._execute(
            f"UPDATE {name} SET {sets} WHERE ctid = %s::tid", [*values.values(), str(locator)]
        )
        if count != 1:
            raise StoreRefused(f"{table}: no row at {locator!r}")

    async def delete(self, table: str, locator: Locator) -> None:
        name, _ = await self._name(table)
        _, _, count = await self._execute(
            f"DELETE FROM {name} WHERE ctid = %s::tid", [str(locator)]
        )
        if count != 1:
            raise StoreRefused(f"{table}: no row at {locator!r}")

    async def insert(self, table: str, values: Mapping[str, JSONScalar]) -> None:
        name, _ = await self._name(table)
        if not values:
            await self._execute(f"INSERT INTO {name} DEFAULT VALUES")
            return
        cols = ", ".join(quote_ident(c) for c in values)
        marks = ", ".join("%s" for _ in values)
        await self._execute(f"INSERT INTO {name} ({cols}) VALUES ({marks})", list(values.values()))
