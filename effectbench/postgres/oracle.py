"""A generic read-only oracle over every table of a PostgreSQL database.

``PostgresOracle(dsn).read()`` returns the same ``Snapshot`` the SQLite oracle does: per
table, every row, in a stable order. It reads all tables inside one ``REPEATABLE READ
READ ONLY`` transaction, so a snapshot is a consistent cut even while the product
writes, and it connects as a role that should hold SELECT only (``PgRun`` in
``effectbench.postgres.databases`` makes one per run): a write through it fails twice over.

Tables: every ordinary or partitioned table (partitions are read through their parent)
in the given schemas, by default every schema but the system ones. A table of schema
``public`` is keyed by its bare name (``encounters``), any other as ``schema.table``.
Rows are ordered by the primary key, else by the whole row's text (``COLLATE "C"``).

Values become JSON scalars without loss (a row stays a flat mapping the judge compares
by equality):

============================  ====================================================
PostgreSQL                    JSON
============================  ====================================================
boolean, smallint..bigint     true/false, integer
text, varchar, char, enums    string
real, double precision        number; ``NaN``, ``Infinity``, ``-Infinity`` as strings
numeric                       string, exactly as the server prints it (``"1.50"``)
timestamptz                   ISO-8601 in UTC, ``"2026-01-02T03:04:05.5Z"``
timestamp                     ISO-8601 without offset (it has none)
date, time, timetz            ISO-8601; ``infinity`` stays ``"infinity"``
interval                      ISO-8601 duration (``"P1DT2H"``)
bytea                         base64 string
json, jsonb                   the JSON text the server holds (jsonb: normalised)
arrays                        the JSON text of the array, elements mapped as above
uuid, inet, anything else     the server's text form
============================  ====================================================
"""

from __future__ import annotations

import base64
import contextlib
import functools
import math
from collections.abc import Sequence
from typing import Any, Final

import orjson

from effectbench.core.model import JSONScalar, Row, Snapshot
from effectbench.oracles.digest import SnapshotScope

SYSTEM_SCHEMAS: Final = ("pg_catalog", "information_schema", "pg_toast")
SESSION_OPTIONS: Final = (
    "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=iso_8601 "
    "-c default_transaction_read_only=on -c extra_float_digits=1 -c bytea_output=hex"
)
CONNECT_TIMEOUT_S: Final = 5

_TABLES: Final = """
SELECT n.nspname, c.relname,
       (SELECT array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum))
        FROM pg_index i JOIN pg_attribute a
          ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey::int2[])
        WHERE i.indrelid = c.oid AND i.indisprimary)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND ({schemas}::text[] IS NULL AND n.nspname <> ALL({system}::text[])
       AND n.nspname NOT LIKE 'pg\\_temp\\_%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%'
       OR n.nspname = ANY({schemas}::text[]))
ORDER BY n.nspname, c.relname
"""


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_key(schema: str, table: str) -> str:
    """How a table is named in a snapshot: bare in ``public``, else ``schema.table``."""
    return table if schema == "public" else f"{schema}.{table}"


def iso_datetime(text: str) -> str:
    """The server's ISO-style output (``DateStyle=ISO``, UTC) as strict ISO-8601."""
    if len(text) > 10 and text[10] == " " and text[0].isdigit():
        text = text[:10] + "T" + text[11:]
    if text.endswith("+00") and "T" in text:
        return text[:-3] + "Z"
    if len(text) > 3 and text[-3] in "+-" and text[-2:].isdigit() and ":" in text:
        return text + ":00"  # timetz / other offsets: "+02" -> "+02:00"
    return text


def json_value(value: Any) -> JSONScalar:
    """One loaded value as a JSON scalar (see the table in the module docstring)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, list):
        return orjson.dumps([_array_element(v) for v in value]).decode()
    return str(value)


def _array_element(value: Any) -> Any:
    if isinstance(value, list):
        return [_array_element(v) for v in value]
    return json_value(value)


@functools.cache
def _adapters() -> Any:
    """The oracle's type mapping, built once; each connection starts from a copy.

    Registered per type, so arrays of these types map their elements the same way."""
    import psycopg
    from psycopg.adapt import AdaptersMap, Loader

    class _Text(Loader):
        def load(self, data: Any) -> str:
            return bytes(data).decode("utf-8")

    class _DateTime(Loader):
        def load(self, data: Any) -> str:
            return iso_datetime(bytes(data).decode("utf-8"))

    class _Bytea(Loader):
        def load(self, data: Any) -> str:
            # text format with bytea_output=hex (set for the session): "\\x" + hex digits
            raw = bytes.fromhex(bytes(data)[2:].decode("ascii"))
            return base64.b64encode(raw).decode("ascii")

    adapters = AdaptersMap(psycopg.adapters)
    for name in ("numeric", "json", "jsonb", "interval", "uuid", "inet", "cidr", "money"):
        adapters.register_loader(name, _Text)
    for name in ("timestamptz", "timestamp", "date", "time", "timetz"):
        adapters.register_loader(name, _DateTime)
    adapters.register_loader("bytea", _Bytea)
    return adapters


BEGIN: Final = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


async def connect(dsn: str) -> Any:
    """A connection set up as the oracle reads: its session options and type mapping
    (a pool may hold one across episodes). Autocommit: a read opens its own
    transaction (``BEGIN``) in the same round trip as its first query."""
    import psycopg

    return await psycopg.AsyncConnection.connect(
        dsn,
        options=SESSION_OPTIONS,
        connect_timeout=CONNECT_TIMEOUT_S,
        context=_adapters(),
        autocommit=True,
    )


class PostgresOracle:
    """``read()`` returns every table's rows; never raises (``Snapshot.unreadable``).

    ``connection``: one made by ``connect`` and owned by the caller (a pool's); the
    oracle reads through it and never closes it, unless a read through it fails.
    ``scope``: the tables logged in full, the rest as a digest per row (as the SQLite
    oracle's; ``SnapshotScope.of(task.expected_effect)``); default every table in full."""

    def __init__(
        self,
        dsn: str,
        schemas: Sequence[str] | None = None,
        *,
        connection: Any = None,
        scope: SnapshotScope | None = None,
    ) -> None:
        self._dsn = dsn
        self._scope = scope
        self._schemas = list(schemas) if schemas is not None else None
        self._conn: Any = connection
        self._borrowed = connection is not None
        self._closed = False

    async def _connect(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = await connect(self._dsn)
            self._borrowed = False
        return self._conn

    async def read(self) -> Snapshot:
        if self._closed:
            return Snapshot.unreadable("the oracle was closed; its database is gone")
        try:
            conn = await self._connect()
            tables = await _read_all(conn, self._schemas)
        except Exception as exc:  # noqa: BLE001 - an oracle reports, it never raises
            await self._drop_connection()
            message = " ".join(str(exc).split()) or type(exc).__name__
            return Snapshot.unreadable(f"postgres read failed: {type(exc).__name__}: {message}")
        if not tables:
            return Snapshot.unreadable("no tables in the database: the store is not initialised")
        scoped = tables if self._scope is None else self._scope.apply(tables)
        return Snapshot(readable=True, tables=scoped)

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a broken connection is being discarded
                await conn.close()

    async def close(self) -> None:
        """Release the connection (a borrowed one stays open for its owner); later reads
        report the store as unreadable."""
        self._closed = True
        if self._borrowed:
            self._conn = None
            return
        await self._drop_connection()


def _text_array(values: Sequence[str] | None) -> str:
    if values is None:
        return "NULL::text[]"
    items = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"ARRAY[{items}]::text[]"


async def _read_all(conn: Any, schemas: list[str] | None) -> dict[str, tuple[Row, ...]]:
    """One REPEATABLE READ READ ONLY transaction in 1 + (number of tables) round trips:
    BEGIN goes with the catalog query, COMMIT with the last table's SELECT (several
    statements in one simple query; literals inlined, as such a query takes no
    parameters)."""
    layout_query = _TABLES.format(schemas=_text_array(schemas), system=_text_array(SYSTEM_SCHEMAS))
    cur = await conn.execute(f"{BEGIN}; {layout_query}")
    cur.nextset()  # past BEGIN's result, to the catalog query's
    layout = await cur.fetchall()
    if not layout:
        await conn.execute("COMMIT")
    out: dict[str, tuple[Row, ...]] = {}
    for n, (schema, table, pk) in enumerate(layout):
        name = f"{quote_ident(schema)}.{quote_ident(table)}"
        order = ", ".join(quote_ident(c) for c in pk) if pk else 't::text COLLATE "C"'
        end = "; COMMIT" if n == len(layout) - 1 else ""
        cur = await conn.execute(f"SELECT * FROM {name} AS t ORDER BY {order}{end}")
        cols = [d.name for d in cur.description] if cur.description else []
        rows = await cur.fetchall()
        out[table_key(schema, table)] = tuple(
            {c: json_value(v) for c, v in zip(cols, r)} for r in rows
        )
    return out
