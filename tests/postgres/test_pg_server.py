"""Where the PostgreSQL server comes from, and a run's databases on it: template clones,
teardown, and what a killed run leaves behind (cleaned at the next start)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from effectbench.postgres.databases import LOCK_CLASS, PgRun
from effectbench.postgres.server import (
    EmbeddedServer,
    PgConfigError,
    check_server,
    reap_stale,
)

DEADLINE_S = 20.0


async def _build(conn: Any) -> None:
    await conn.execute("CREATE TABLE t(id int PRIMARY KEY, v text)")
    await conn.execute("INSERT INTO t VALUES (1, 'from the template')")


async def _names(dsn: str, run_id: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s "
            "UNION ALL SELECT rolname FROM pg_roles WHERE rolname LIKE %s ORDER BY 1",
            (f"eb_{run_id}_%", f"eb_{run_id}_%"),
        )
        return [str(r[0]) for r in await cur.fetchall()]


@pytest.mark.anyio
async def test_each_episode_gets_a_clone_of_the_template_dropped_on_teardown(pg_dsn: str) -> None:
    run = PgRun(pg_dsn)
    await run.open(_build)
    a, b = await run.clone(), await run.clone()
    assert a != b and run.run_id in a
    async with await psycopg.AsyncConnection.connect(run.dsn(a), autocommit=True) as conn:
        await conn.execute("INSERT INTO t VALUES (2, 'episode a only')")
    async with await psycopg.AsyncConnection.connect(run.dsn(b), autocommit=True) as conn:
        cur = await conn.execute("SELECT v FROM t ORDER BY id")
        assert [r[0] for r in await cur.fetchall()] == ["from the template"]
    await run.drop(a)
    assert a not in await _names(pg_dsn, run.run_id)
    await run.close()
    assert await _names(pg_dsn, run.run_id) == []  # b, the template and the role are gone


_HOLDER = """
import sys, anyio
from effectbench.postgres.databases import PgRun
async def build(conn):
    await conn.execute("CREATE TABLE t(id int)")
async def main():
    run = PgRun(sys.argv[1])
    await run.open(build)
    await run.clone(); await run.clone()
    print(run.run_id, flush=True)
    await anyio.to_thread.run_sync(sys.stdin.read)
anyio.run(main)
"""


async def _lock_gone(dsn: str, key_of: str) -> None:
    from effectbench.postgres.databases import _lock_key

    with anyio.fail_after(DEADLINE_S):
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            while True:
                cur = await conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND classid = %s AND objid = %s",
                    (LOCK_CLASS, _lock_key(key_of)),
                )
                row = await cur.fetchone()
                if row is not None and row[0] == 0:
                    return
                await anyio.sleep(0.02)


@pytest.mark.anyio
async def test_a_killed_runs_databases_are_dropped_at_the_next_start_a_live_runs_kept(
    pg_dsn: str,
) -> None:
    live = PgRun(pg_dsn)
    await live.open(_build)
    live_db = await live.clone()
    proc = subprocess.Popen(  # noqa: ASYNC220 - a real process, to be killed with SIGKILL
        [sys.executable, "-c", _HOLDER, pg_dsn],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        killed_id = proc.stdout.readline().strip()
        assert len(await _names(pg_dsn, killed_id)) == 4  # template, two episodes, role
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    await _lock_gone(pg_dsn, killed_id)
    assert len(await _names(pg_dsn, killed_id)) == 4  # a kill leaves them behind ...
    nxt = PgRun(pg_dsn)
    await nxt.open(_build)
    assert await _names(pg_dsn, killed_id) == []  # ... the next run's start drops them
    assert live_db in await _names(pg_dsn, live.run_id)  # a live run's are untouched
    await nxt.close()
    await live.close()


@pytest.fixture
def pg_root() -> Iterator[Path]:
    # short: the server's unix socket lives in it (108 bytes at most)
    root = Path(tempfile.mkdtemp(prefix="ebt-", dir="/dev/shm"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


_SERVER = """
import sys
from pathlib import Path
from effectbench.postgres.server import EmbeddedServer
server = EmbeddedServer(Path(sys.argv[1]))
print(server.start(), flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_killed_runs_server_is_stopped_and_deleted_by_the_next_start(pg_root: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(pg_root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        dsn = proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (stale,) = pg_root.glob("srv-*")
    pid = int((stale / "data" / "postmaster.pid").read_text().split()[0])
    # pg_ctl daemonized the server; its warden (core/children.py) stops it once the
    # harness is gone, and the directory waits for the next start
    end = time.monotonic() + 30
    while _alive(pid):
        assert time.monotonic() < end, "the killed harness's server is still running"
        time.sleep(0.02)  # a bounded wait on another process's exit, not an ordering sleep
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=5).close()
    assert stale.exists()

    server = EmbeddedServer(pg_root)
    server.start()
    try:
        assert not stale.exists() and not _alive(pid)
        assert [p.name for p in pg_root.glob("srv-*")] == [server.dir.name if server.dir else ""]
        assert reap_stale(pg_root) == []  # a live server's directory is never reaped
    finally:
        server.stop()
    assert list(pg_root.glob("srv-*")) == []


def test_a_root_too_deep_for_a_unix_socket_is_one_clear_error(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 90)
    with pytest.raises(PgConfigError, match="too deep for the server's unix socket"):
        EmbeddedServer(deep).start()


@pytest.mark.anyio
async def test_check_server_names_what_is_missing(pg_dsn: str) -> None:
    info = await check_server(pg_dsn)
    assert info.major >= 13
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute("DROP ROLE IF EXISTS ebtest_norole")
        await conn.execute("CREATE ROLE ebtest_norole LOGIN CREATEDB")
    from effectbench.postgres.server import with_database

    with pytest.raises(PgConfigError, match="lacks CREATEROLE"):
        await check_server(with_database(pg_dsn, "postgres", user="ebtest_norole"))
    with pytest.raises(PgConfigError, match="cannot connect to PostgreSQL") as caught:
        await check_server("postgresql://nobody:secret@127.0.0.1:1/x")
    assert "secret" not in str(caught.value)  # the password is never printed


async def _exists(dsn: str, name: str) -> bool:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        return await cur.fetchone() is not None


@pytest.mark.anyio
async def test_a_released_database_is_dropped_once_its_sessions_are_gone(pg_dsn: str) -> None:
    run = PgRun(pg_dsn)
    await run.open(_build)
    held, kept = await run.clone(), await run.clone()
    session = await psycopg.AsyncConnection.connect(run.dsn(held), autocommit=True)
    free = await run.clone()
    run.release(free)
    run.release(held)  # its session is still open: the dropper waits for it
    with anyio.fail_after(DEADLINE_S):
        while await _exists(pg_dsn, free):
            await anyio.sleep(0.01)
    assert await _exists(pg_dsn, held)
    assert (await (await session.execute("SELECT count(*) FROM t")).fetchone()) == (1,)
    await session.close()
    with anyio.fail_after(DEADLINE_S):
        while await _exists(pg_dsn, held):
            await anyio.sleep(0.01)
    # close() drops what was never released, sessions or not
    other = await psycopg.AsyncConnection.connect(run.dsn(kept), autocommit=True)
    await run.close()
    assert await _names(pg_dsn, run.run_id) == []
    await other.close()
    run.release("eb_after_close_e1")  # after close: a no-op, never an error
