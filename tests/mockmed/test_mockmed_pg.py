"""MockMed on PostgreSQL through the real CLI: the anchor's pinned values on a real server,
the two PostgreSQL-only faults, and bad server configurations (one line, exit 2, nothing
written)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import psycopg
import pytest

from effectbench.cli.console import reference_rows
from effectbench.postgres.server import with_database
from effectbench.testing import effectbench_command, run_cli


def _pg_env(**extra: str) -> dict[str, str]:
    """This environment without a user's EFFECTBENCH_PG_DSN (each test picks its server)."""
    return {**{k: v for k, v in os.environ.items() if k != "EFFECTBENCH_PG_DSN"}, **extra}


def _cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env=_pg_env(**(env or {})))


def _results(out: Path) -> list[dict[str, object]]:
    return [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]


@pytest.mark.timeout(150)
def test_the_anchor_on_the_harness_own_server_reproduces_the_pinned_values(tmp_path: Path) -> None:
    """No --pg-dsn: the harness starts a server from the wheel, and stops it."""
    from effectbench_mockmed.anchor import PINNED

    out = tmp_path / "anchor-pg"
    proc = _cli("run", "--provider", "mockmed-pg", "--out", str(out), "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    metrics = orjson.loads((out / "metrics.json").read_bytes())
    results = _results(out)
    rows = reference_rows(PINNED, metrics, results)
    assert rows and all(ok for *_, ok in rows), [r for r in rows if not r[4]]
    for arm, pinned in PINNED.items():
        per_mode = {
            str(r["task_id"]).split("::")[1]: r["outcome"] for r in results if r["arm"] == arm
        }
        assert per_mode == dict(pinned.per_mode)
    assert len(results) == 180 and all(r["failure_class"] is None for r in results)


@pytest.mark.timeout(150)
def test_the_two_concurrency_faults_on_the_users_server(tmp_path: Path, pg_dsn: str) -> None:
    out = tmp_path / "races"
    proc = _cli(
        "run",
        "--provider",
        "mockmed-pg-full",
        "--task",
        "*lost_update",
        "--task",
        "*split_save",
        "--trials",
        "3",
        "--pg-dsn",
        pg_dsn,
        "--out",
        str(out),
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    got = {
        (r["arm"], r["task_id"], r["trial"]): (r["outcome"], r["verdict_reasons"])
        for r in _results(out)
    }
    assert len(got) == 12
    for (arm, task, _), (outcome, reasons) in got.items():
        expected = "SILENT_WRONG_EFFECT" if arm == "screen_only" else "WRONG_ACTION"
        assert outcome == expected, (arm, task, reasons)
        if task == "mockmed::lost_update":
            # ward B's amendment, committed while the product's edit was open, is overwritten
            assert any("overwritten in place (id=1)" in str(x) for x in reasons), reasons  # type: ignore[union-attr]
        else:
            assert any("holds ''" in str(x) for x in reasons), reasons  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_the_lost_update_needs_read_committed(pg_dsn: str) -> None:
    """The same interleaving at REPEATABLE READ fails to serialize instead of losing the
    amendment: the fault is the product's isolation level, shown by a real server."""
    from effectbench_mockmed.pg_store import AMENDED_NOTE, PG_SCHEMA_DDL

    from effectbench.postgres.databases import PgRun

    async def build(conn: object) -> None:
        await conn.execute(PG_SCHEMA_DDL)  # type: ignore[attr-defined]
        await conn.execute(  # type: ignore[attr-defined]
            "INSERT INTO encounters(patient_id, type, note, source) VALUES ('p1', 'Urgent', "
            "'old', 'ward-b')"
        )

    run = PgRun(pg_dsn)
    await run.open(build)
    try:
        for level, loses in (
            (psycopg.IsolationLevel.READ_COMMITTED, True),
            (psycopg.IsolationLevel.REPEATABLE_READ, False),
        ):
            db = await run.clone()
            edit = await psycopg.AsyncConnection.connect(run.dsn(db))
            await edit.set_isolation_level(level)
            other = await psycopg.AsyncConnection.connect(run.dsn(db), autocommit=True)
            stale = await (
                await edit.execute("SELECT note FROM encounters WHERE id = 1")
            ).fetchone()
            await other.execute("UPDATE encounters SET note = %s WHERE id = 1", (AMENDED_NOTE,))
            if loses:
                await edit.execute("UPDATE encounters SET note = %s WHERE id = 1", stale)
                await edit.commit()
                now = await (await other.execute("SELECT note FROM encounters")).fetchone()
                assert now == ("old",)  # the amendment is lost
            else:
                with pytest.raises(psycopg.errors.SerializationFailure):
                    await edit.execute("UPDATE encounters SET note = %s WHERE id = 1", stale)
            await edit.close()
            await other.close()
            await run.drop(db)
    finally:
        await run.close()


async def _run_databases(dsn: str, run_id: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s ORDER BY 1",
            (f"eb_{run_id}_e%",),
        )
        return [str(r[0]) for r in await cur.fetchall()]


@pytest.mark.anyio
async def test_teardown_resets_the_episode_database_and_stop_drops_it(pg_dsn: str) -> None:
    """The next episode gets the same database back in the template's state (ward B's
    seeded and amended row, the product's edit: all gone); stop drops the pool."""
    from effectbench_mockmed.pg_provider import MockMedPgFullProvider

    provider = MockMedPgFullProvider(dsn=pg_dsn)
    await provider.start()
    try:
        run_id = provider.run_id
        assert run_id is not None
        tasks = {t.task_id: t for t in provider.tasks()}
        episode = await provider.provision(tasks["mockmed::lost_update"], 0, {"note": "n"})
        pre = await episode.oracle.read()
        # provisioning left the product's edit open and ward B's amendment committed
        assert [r["note"] for r in pre.rows("encounters")] == [
            "chest pain, assessed by ward B; ECG normal"
        ]
        used = await _run_databases(pg_dsn, run_id)
        await episode.teardown()
        await episode.teardown()  # idempotent
        again = await provider.provision(tasks["mockmed::ok"], 0, {"note": "n"})
        assert await _run_databases(pg_dsn, run_id) == used  # reused, not cloned
        assert (await again.oracle.read()).rows("encounters") == ()
        await again.teardown()
    finally:
        await provider.stop()
    assert await _run_databases(pg_dsn, run_id) == []


# --- bad server configurations: one line, exit 2, nothing written -----------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


@pytest.fixture
def old_server() -> Iterator[int]:
    """A real TCP server on 127.0.0.1 speaking just enough of the PostgreSQL protocol to
    say it is PostgreSQL 9.6 (a server we have no binaries for)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                while True:
                    head = conn.recv(8)
                    if len(head) < 8:
                        break
                    length, code = struct.unpack("!II", head)
                    conn.recv(length - 8)
                    if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: no
                        conn.sendall(b"N")
                        continue
                    params = b"".join(
                        _message(b"S", k + b"\0" + v + b"\0")
                        for k, v in (
                            (b"server_version", b"9.6.24"),
                            (b"client_encoding", b"UTF8"),
                            (b"standard_conforming_strings", b"on"),
                            (b"integer_datetimes", b"on"),
                        )
                    )
                    conn.sendall(
                        _message(b"R", struct.pack("!I", 0))
                        + params
                        + _message(b"K", struct.pack("!II", 1, 2))
                        + _message(b"Z", b"I")
                    )
                    conn.recv(64)  # Terminate, or the hang-up
                    break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        listener.close()
        thread.join(timeout=5)


def _refused(proc: subprocess.CompletedProcess[str], out: Path, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("effectbench: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    assert not out.exists()  # nothing written


def test_an_unreachable_dsn_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    dsn = f"postgresql://eb:hunter2@127.0.0.1:{_closed_port()}/x"
    proc = _cli("run", "--provider", "mockmed-pg", "--pg-dsn", dsn, "--out", str(out), cwd=tmp_path)
    _refused(proc, out, "cannot connect to PostgreSQL", "--pg-dsn")
    assert "hunter2" not in proc.stderr
    # the same DSN from the environment
    proc = _cli(
        "run",
        "--provider",
        "mockmed-pg",
        "--out",
        str(out),
        cwd=tmp_path,
        env={"EFFECTBENCH_PG_DSN": dsn},
    )
    _refused(proc, out, "cannot connect to PostgreSQL")


def test_a_role_without_createdb_is_one_line_and_writes_nothing(
    tmp_path: Path, pg_dsn: str
) -> None:
    async def make_role() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute("DROP ROLE IF EXISTS ebtest_nocreatedb")
            await conn.execute("CREATE ROLE ebtest_nocreatedb LOGIN")

    anyio.run(make_role)
    out = tmp_path / "run"
    dsn = with_database(pg_dsn, "postgres", user="ebtest_nocreatedb")
    proc = _cli("run", "--provider", "mockmed-pg", "--pg-dsn", dsn, "--out", str(out), cwd=tmp_path)
    _refused(proc, out, "lacks CREATEDB", "ALTER ROLE ebtest_nocreatedb CREATEDB")


def test_an_unsupported_major_version_is_one_line_and_writes_nothing(
    tmp_path: Path, old_server: int
) -> None:
    out = tmp_path / "run"
    dsn = f"postgresql://eb@127.0.0.1:{old_server}/x?sslmode=disable&gssencmode=disable"
    proc = _cli("run", "--provider", "mockmed-pg", "--pg-dsn", dsn, "--out", str(out), cwd=tmp_path)
    _refused(proc, out, "PostgreSQL 9.6 ", "is not supported", "13 or newer")


def test_a_dsn_for_a_provider_without_postgres_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _cli(
        "run",
        "--provider",
        "mockmed",
        "--pg-dsn",
        "postgresql:///x",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    _refused(proc, out, "provider 'mockmed' takes no --pg-dsn")


def _lines(log: Path) -> int:
    try:
        return log.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.timeout(150)
def test_a_killed_run_is_resumed_and_its_server_stopped_by_the_next_start(tmp_path: Path) -> None:
    import shutil
    import signal
    import tempfile
    import time

    root = Path(tempfile.mkdtemp(prefix="ebk-", dir="/dev/shm"))  # short: the socket is in it
    env = _pg_env(EFFECTBENCH_PG_DIR=str(root))
    out = tmp_path / "run"
    try:
        proc = subprocess.Popen(
            [
                *effectbench_command(),
                "run",
                "--provider",
                "mockmed-pg",
                "--trials",
                "2",
                "--concurrency",
                "2",
                "--out",
                str(out),
                "-q",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while _lines(out / "events.jsonl") < 60:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.005)
        (stale,) = root.glob("srv-*")
        pid = int((stale / "data" / "postmaster.pid").read_text().split()[0])
        assert _alive(pid)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        # pg_ctl detached the postmaster, so the harness's warden stops it once the harness
        # is gone (how soon depends on the machine: polled, not assumed either way); its
        # directory, with the run's databases, is left for the next start to reap
        gone_by = time.monotonic() + 60
        while _alive(pid):
            assert time.monotonic() < gone_by, "the killed run's server outlived it"
            time.sleep(0.05)
        assert stale.exists()

        resumed = _cli(
            "run", "--resume", str(out), "-q", cwd=tmp_path, env={"EFFECTBENCH_PG_DIR": str(root)}
        )
        assert resumed.returncode == 0, resumed.stderr
        assert not stale.exists() and not _alive(pid)  # reaped by the resumed run's start
        assert list(root.glob("srv-*")) == []  # and the resumed run stopped its own
        results = _results(out)
        assert len(results) == 36 and all(r["failure_class"] is None for r in results)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(300)
def test_a_killed_embedded_server_is_said_restarted_once_and_its_episodes_resumed(
    tmp_path: Path,
) -> None:
    """The harness's own PostgreSQL server SIGKILLed while four episodes are in flight on
    it: one line says so, the server is restarted and the run goes on; the episodes in
    flight are abandoned (never scored) and the run exits 5; the product's tracebacks
    stay off the terminal; --resume runs the abandoned ones."""
    import shutil
    import signal
    import tempfile
    import time

    tests = Path(__file__).resolve().parents[1]
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    root = Path(tempfile.mkdtemp(prefix="ebk-", dir="/dev/shm"))  # short: the socket is in it
    env = _pg_env(
        EFFECTBENCH_PG_DIR=str(root),
        EFFECTBENCH_TEST_BARRIER=str(barrier),
        PYTHONPATH=os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")]),
    )
    out = tmp_path / "run"
    argv = ["--provider", "mockmed-pg", "--arm", "dask_arms:ProductAfterBarrierArm"]
    try:
        proc = subprocess.Popen(
            [*effectbench_command(), "run", *argv, "--trials", "1", "--concurrency", "4"]
            + ["--out", str(out), "-q"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        while len(list(barrier.glob("inflight-*"))) < 4:  # four episodes on the server
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        (server,) = root.glob("srv-*")
        os.kill(int((server / "data" / "postmaster.pid").read_text().split()[0]), signal.SIGKILL)
        seen = []
        for line in proc.stderr:  # the harness says it at once; then the arms go on
            seen.append(line)
            if "the PostgreSQL server died" in line:
                break
        (barrier / "go").touch()
        _, err = proc.communicate(timeout=240)
        err = "".join(seen) + err
        assert proc.returncode == 5, err
        assert "restarted, and the run went on; 4 episode(s) in flight on it were abandoned" in err
        assert f"effectbench run --resume {out}" in err
        assert "Traceback" not in err and "Exception in ASGI application" not in err, err
        events = [orjson.loads(x) for x in (out / "events.jsonl").read_bytes().splitlines()]
        abandoned = {e["ep"] for e in events if e["type"] == "episode.abandoned"}
        ended = [e["ep"] for e in events if e["type"] in ("episode.finished", "episode.failed")]
        assert len(abandoned) == 4 and len(ended) == 5 and abandoned.isdisjoint(ended)
        assert all(e["type"] != "episode.failed" for e in events), "blamed on someone"
        verified = _cli("verify", str(out), cwd=tmp_path, env=env)  # never sound, nor complete
        assert verified.returncode == 1 and verified.stdout.startswith("NOT sound"), verified

        resumed = _cli("run", "--resume", str(out), "-q", cwd=tmp_path, env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert len(_results(out)) == 9 and all(r["failure_class"] is None for r in _results(out))
    finally:
        shutil.rmtree(root, ignore_errors=True)
