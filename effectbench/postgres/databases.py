"""One run's databases on a PostgreSQL server (``effectbench.postgres.server``).

``PgRun`` owns one run's objects on a server: a SELECT-only oracle role, a template
database built once, and one database per episode cloned from it. Every name carries
the run's id, and the run holds an advisory lock keyed by it, so a later run drops
the objects of runs whose lock is gone (killed) and leaves live ones alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import hashlib
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Final

import anyio
import structlog

from effectbench.postgres.server import CONNECT_TIMEOUT_S, one_line, with_database

if TYPE_CHECKING:
    import psycopg
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

log = structlog.get_logger("effectbench.postgres.databases")

LOCK_CLASS: Final = 0x45424E43
"""First key of every run's advisory lock (the second is derived from the run id)."""
NAME_PREFIX: Final = "eb_"
_RUN_NAME = re.compile(r"^eb_([0-9a-z]+)_(?:tmpl|ro|e\d+)$")
DRAIN_TIMEOUT_S: Final = 5.0
"""How long closing a run waits for released databases' sessions to exit by themselves."""
ADMIN_POOL: Final = 4
"""Admin connections for concurrent CREATE/DROP DATABASE (each runs one at a time)."""


def new_run_id() -> str:
    """Sortable and unique: UTC time plus random hex, lowercase (a valid identifier part)."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y%m%d%H%M%S") + secrets.token_hex(3)


def _lock_key(run_id: str) -> int:
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big") >> 1


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


Builder = Callable[["psycopg.AsyncConnection[tuple[object, ...]]"], Awaitable[None]]


class PgRun:
    """One run's oracle role, template and episode databases on one server."""

    def __init__(self, admin_dsn: str, run_id: str | None = None) -> None:
        self.admin_dsn = admin_dsn
        self.run_id = run_id or new_run_id()
        self.template = f"{NAME_PREFIX}{self.run_id}_tmpl"
        self.oracle_role = f"{NAME_PREFIX}{self.run_id}_ro"
        self._oracle_password = secrets.token_hex(16)
        self._admins: list[psycopg.AsyncConnection[tuple[object, ...]]] = []
        self._send: MemoryObjectSendStream[int] | None = None
        self._recv: MemoryObjectReceiveStream[int] | None = None
        self._count = 0
        self._live: set[str] = set()
        self._released: MemoryObjectSendStream[str] | None = None
        self._dropper: asyncio.Task[None] | None = None

    async def open(self, build: Builder, schemas: tuple[str, ...] = ("public",)) -> None:
        """Lock the run id, drop killed runs' objects, create the oracle role and build the
        template (``build`` gets a connection to it), then open the admin pool."""
        import psycopg

        first = await psycopg.AsyncConnection.connect(
            self.admin_dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
        )
        self._admins.append(first)
        await first.execute(
            "SELECT pg_advisory_lock(%s::int4, %s::int4)", (LOCK_CLASS, _lock_key(self.run_id))
        )
        await drop_orphans(first)
        role = _ident(self.oracle_role)
        await first.execute(
            f"CREATE ROLE {role} LOGIN NOINHERIT PASSWORD '{self._oracle_password}'"
        )
        await first.execute(f"CREATE DATABASE {_ident(self.template)}")
        async with await psycopg.AsyncConnection.connect(
            with_database(self.admin_dsn, self.template), autocommit=True
        ) as conn:
            await build(conn)
            for schema in schemas:
                s = _ident(schema)
                await conn.execute(f"GRANT USAGE ON SCHEMA {s} TO {role}")
                await conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {role}")
                await conn.execute(
                    f"ALTER DEFAULT PRIVILEGES IN SCHEMA {s} GRANT SELECT ON TABLES TO {role}"
                )
        for _ in range(ADMIN_POOL - 1):
            self._admins.append(
                await psycopg.AsyncConnection.connect(self.admin_dsn, autocommit=True)
            )
        self._send, self._recv = anyio.create_memory_object_stream[int](ADMIN_POOL)
        for index in range(ADMIN_POOL):
            self._send.send_nowait(index)
        dropper_conn = await psycopg.AsyncConnection.connect(self.admin_dsn, autocommit=True)
        self._admins.append(dropper_conn)
        released, inbox = anyio.create_memory_object_stream[str](float("inf"))
        self._released = released
        # A task of the running loop, not of a task group: open() and close() are separate
        # calls (the same reason as effectbench.serve.LocalServer).
        self._dropper = asyncio.get_running_loop().create_task(
            self._drop_released(dropper_conn, inbox), name="effectbench-pg-dropper"
        )

    @contextlib.asynccontextmanager
    async def _admin(self) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
        assert self._recv is not None and self._send is not None, "PgRun.open() first"
        index = await self._recv.receive()
        try:
            yield self._admins[index]
        finally:
            self._send.send_nowait(index)

    async def clone(self) -> str:
        """A fresh episode database, a copy of the template; returns its name."""
        self._count += 1
        name = f"{NAME_PREFIX}{self.run_id}_e{self._count}"
        async with self._admin() as admin:
            await admin.execute(
                f"CREATE DATABASE {_ident(name)} TEMPLATE {_ident(self.template)} STRATEGY "
                "FILE_COPY"
            )
        self._live.add(name)
        return name

    def release(self, name: str) -> None:
        """Drop an episode database in the background, once its sessions have exited.

        Teardown does not wait: a session its client just closed lingers for a moment on
        the server, and DROP DATABASE waits for such sessions in 100 ms steps (measured:
        ~100 ms of a ~130 ms episode at concurrency 1)."""
        if self._released is not None:
            self._released.send_nowait(name)
        # else: closing or closed, and close() drops every database still live

    async def _drop_released(
        self,
        conn: psycopg.AsyncConnection[tuple[object, ...]],
        inbox: MemoryObjectReceiveStream[str],
    ) -> None:
        waiting: list[str] = []
        ended = False
        while not ended or waiting:
            if not waiting:
                try:
                    waiting.append(await inbox.receive())
                except anyio.EndOfStream:
                    return
            while True:
                try:
                    waiting.append(inbox.receive_nowait())
                except anyio.WouldBlock:
                    break
                except anyio.EndOfStream:
                    ended = True
                    break
            cur = await conn.execute(
                "SELECT DISTINCT datname FROM pg_stat_activity WHERE datname = ANY(%s)",
                (waiting,),
            )
            busy = {str(r[0]) for r in await cur.fetchall()}
            for name in waiting:
                if name not in busy:
                    await conn.execute(f"DROP DATABASE IF EXISTS {_ident(name)} WITH (FORCE)")
                    self._live.discard(name)
            waiting = [n for n in waiting if n in busy]
            if waiting:
                await anyio.sleep(0.01)  # their sessions are exiting; look again shortly

    async def _finish_drops(self) -> None:
        """Stop taking releases and wait for the dropper to finish what it can."""
        released, self._released = self._released, None
        task, self._dropper = self._dropper, None
        if released is not None:
            released.close()
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=DRAIN_TIMEOUT_S)
            if not done:  # a session that never goes away: close() drops WITH (FORCE)
                task.cancel()
                await asyncio.wait({task})
            if not task.cancelled() and task.exception() is not None:
                log.warning("pg.dropper_failed", error=one_line(task.exception()))  # type: ignore[arg-type]

    async def drop(self, name: str) -> None:
        """Drop an episode database now, closing any session still on it. Idempotent."""
        self._live.discard(name)
        async with self._admin() as admin:
            await admin.execute(f"DROP DATABASE IF EXISTS {_ident(name)} WITH (FORCE)")

    def dsn(self, database: str) -> str:
        """The product's DSN for a database (the admin role)."""
        return with_database(self.admin_dsn, database)

    def oracle_dsn(self, database: str) -> str:
        """The oracle's DSN: the run's SELECT-only role."""
        return with_database(
            self.admin_dsn, database, user=self.oracle_role, password=self._oracle_password
        )

    async def abandon(self) -> None:
        """The server died under the run: close what it held there, quietly (nothing is
        left to drop; the restarted server is a new one). Idempotent."""
        released, self._released = self._released, None
        task, self._dropper = self._dropper, None
        if released is not None:
            released.close()
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
        admins, self._admins = self._admins, []
        for conn in admins:
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        """Drop every database and the role of this run, release the lock. Idempotent."""
        with anyio.CancelScope(shield=True):
            await self._finish_drops()
        admins, self._admins = self._admins, []
        if not admins:
            return
        try:
            first = admins[0]
            for name in sorted(self._live):
                await first.execute(f"DROP DATABASE IF EXISTS {_ident(name)} WITH (FORCE)")
            self._live.clear()
            await first.execute(f"DROP DATABASE IF EXISTS {_ident(self.template)} WITH (FORCE)")
            await first.execute(f"DROP ROLE IF EXISTS {_ident(self.oracle_role)}")
        finally:
            for conn in admins:
                await conn.close()


async def drop_orphans(admin: psycopg.AsyncConnection[tuple[object, ...]]) -> list[str]:
    """Drop the databases and roles of runs whose advisory lock is gone (killed runs)."""
    cur = await admin.execute(
        "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s",
        (LOCK_CLASS,),
    )
    alive = {int(str(r[0])) for r in await cur.fetchall()}
    cur = await admin.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE 'eb\\_%' ORDER BY datname"
    )
    databases = [str(r[0]) for r in await cur.fetchall()]
    cur = await admin.execute(
        "SELECT rolname FROM pg_roles WHERE rolname LIKE 'eb\\_%' ORDER BY rolname"
    )
    roles = [str(r[0]) for r in await cur.fetchall()]
    dropped: list[str] = []
    for name in databases + roles:
        match = _RUN_NAME.match(name)
        if match is None or _lock_key(match.group(1)) in alive:
            continue
        if name in roles:
            await admin.execute(f"DROP ROLE IF EXISTS {_ident(name)}")
        else:
            await admin.execute(f"DROP DATABASE IF EXISTS {_ident(name)} WITH (FORCE)")
        dropped.append(name)
    return dropped
