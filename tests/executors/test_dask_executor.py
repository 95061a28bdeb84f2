"""The Dask executor: the same results as the local one, a lost worker's episodes re-run
once each, and one-line errors for what a user must fix.

Clusters listen on 127.0.0.1 only, with no dashboard."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import distributed
import orjson
import pytest
from cli_env import TESTS, pythonpath_env
from dask_arms import BARRIER_ENV

from effectbench.api import evaluate_provider
from effectbench.core.events import TERMINAL_TYPES
from effectbench.log.reader import open_log_writer, read_log
from effectbench.testing import effectbench_command, run_cli, untimed_run

# Two test processes may each start a cluster: the second's HTTP server takes another port.
pytestmark = pytest.mark.filterwarnings("ignore:Port .* is already in use:UserWarning")

_cli = partial(run_cli, timeout=300)


def _terminals(log: Path) -> collections.Counter[str]:
    return collections.Counter(
        str(ev.ep) for ev in read_log(log) if ev.type in TERMINAL_TYPES and ev.ep is not None
    )


def _sound(run_dir: Path) -> None:
    """verify: sound; the test's barrier arm runs in the worker's process, uncontained (4)."""
    done = _cli("verify", str(run_dir))
    assert done.returncode == 4 and "sound, NOT contained" in done.stdout, done


def _not_sound(run_dir: Path) -> None:
    """verify of a run that lost a service: its abandoned episodes keep it from being
    called sound (or complete) before --resume runs them."""
    done = _cli("verify", str(run_dir))
    assert done.returncode == 1 and done.stdout.startswith("NOT sound"), done


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("provider", "trials"), [("mockmed", 2), ("mockmed-full", 1)])
def test_dask_local_gives_the_local_results(tmp_path: Path, provider: str, trials: int) -> None:
    arms = ["screen_only", "effect_verified"]
    runs = {
        ex: evaluate_provider(
            arms,
            provider,
            trials=trials,
            concurrency=16,
            out=tmp_path / ex.replace(":", "-"),
            executor=ex,
            report=False,
        )
        for ex in ("local", "dask-local:2")
    }
    (r_local, m_local), (r_dask, m_dask) = (untimed_run(r.run_dir) for r in runs.values())
    assert r_local and list(r_local) == list(r_dask)
    for ep in r_local:
        assert r_local[ep] == r_dask[ep], ep
    assert m_local == m_dask
    log = runs["dask-local:2"].log_path
    assert set(_terminals(log).values()) == {1}
    assert _cli("verify", str(runs["dask-local:2"].run_dir)).returncode == 0


@pytest.fixture
def barrier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "barrier"
    where.mkdir()
    monkeypatch.setenv(BARRIER_ENV, str(where))  # before the workers spawn: they inherit it
    return where


@pytest.fixture
def cluster(barrier: Path, request: pytest.FixtureRequest) -> Iterator[distributed.Client]:
    """A local cluster of two worker processes (or ``request.param``)."""
    with (
        distributed.LocalCluster(
            n_workers=getattr(request, "param", 2),
            threads_per_worker=8,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as lc,
        distributed.Client(lc, set_as_default=False) as client,
    ):
        yield client


def _wait_for(what: str, ready: object, deadline_s: float = 120.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@contextlib.contextmanager
def _held_run(barrier: Path, *argv: str, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``effectbench run ARGV`` in a session of its own, handed over once its barrier arms
    hold episodes; it and whatever it started are SIGKILLed if still running at the end."""
    harness = subprocess.Popen(
        [*effectbench_command(), "run", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for("episodes in flight", lambda: any(barrier.glob("inflight-*")))
        yield harness
    finally:
        if harness.poll() is None:
            os.killpg(harness.pid, signal.SIGKILL)
            harness.wait()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cluster", [2, 1], indirect=True, ids=["two-workers", "one-worker"])
def test_a_killed_worker_loses_no_episode_and_doubles_none(
    tmp_path: Path, barrier: Path, cluster: distributed.Client, request: pytest.FixtureRequest
) -> None:
    """With one worker, the killed worker held the only copy of whatever the harness had
    put on the cluster: its restarted successor must still get the run's setup."""
    address = cluster.scheduler.address
    # the worker processes' pids (scheduler info names the workers, each answers its pid)
    workers = list(cluster.scheduler_info()["workers"])
    pids = set(cluster.run(os.getpid, workers=workers).values())
    assert len(pids) == request.node.callspec.params["cluster"]
    out = tmp_path / "run"
    dask = address.replace("tcp://", "dask://")
    with _held_run(
        barrier, "--provider", "mockmed", "--arm", "dask_arms:BarrierArm", "--trials", "2",
        "--concurrency", "18", "--executor", dask, "--out", str(out), "-q",
        env=pythonpath_env(TESTS),
    ) as harness:  # fmt: skip
        # the victim: a worker seen holding episodes (Dask may place every batch on one)
        victim = int(next(barrier.glob("inflight-*")).name.split("-")[1])
        assert victim in pids
        lost = [p.name for p in barrier.iterdir() if p.name.startswith(f"inflight-{victim}-")]
        os.kill(victim, signal.SIGKILL)
        (barrier / "go").touch()
        _, err = harness.communicate(timeout=240)
    assert harness.returncode == 0, err
    counts = _terminals(out / "events.jsonl")
    assert len(counts) == 18 and set(counts.values()) == {1}, counts
    # each lost episode ran again, on another (or the restarted) worker
    for name in lost:
        again = name.split("-", 2)[2]
        assert any(
            p.name.endswith(again) and not p.name.startswith(f"inflight-{victim}-")
            for p in barrier.iterdir()
        ), name
    _sound(out)
    results, _ = untimed_run(out)
    assert len(results) == 18


@pytest.mark.timeout(300)
def test_a_worker_without_the_plugin_says_so_in_one_line(
    tmp_path: Path, cluster: distributed.Client
) -> None:
    only_here = tmp_path / "only_here"
    only_here.mkdir()
    (only_here / "harness_only_arm.py").write_text(
        "from dask_arms import BarrierArm as Arm\n", encoding="utf-8"
    )
    address = cluster.scheduler.address.replace("tcp://", "dask://")
    done = _cli(
        "run",
        "--arm",
        "harness_only_arm:Arm",
        "--trials",
        "1",
        "--executor",
        address,
        "--out",
        str(tmp_path / "run"),
        "-q",
        env=pythonpath_env(only_here, TESTS),
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert (
        "install the provider's and arms' distributions in every worker's environment" in lines[0]
    )
    assert "Traceback" not in done.stderr


def test_without_dask_the_executor_says_how_to_install_it(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['distributed'] = None\n"
        "from effectbench.cli.commands import main\n"
        f"sys.exit(main(['run', '--executor', 'dask-local:2', '--out', {str(tmp_path / 'r')!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'effectbench[dask]'" in lines[0], done.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("value", ["dask", "dask-local:0", "dask-local:x", "dask://nohost", "k8s"])
def test_a_bad_executor_is_one_line(tmp_path: Path, value: str) -> None:
    done = _cli("run", "--executor", value, "--out", str(tmp_path / "r"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--executor" in lines[0], done.stderr


@pytest.mark.anyio
async def test_the_writer_keeps_a_given_timestamp_and_assigns_seq_and_hash(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    async with open_log_writer(path) as writer:
        await writer.emit("x.one", {"a": 1}, "ep", 123.5)
        await writer.emit("x.two", {"a": 2}, "ep")
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert (lines[0]["seq"], lines[0]["ts"]) == (0, 123.5)
    assert lines[1]["seq"] == 1 and lines[1]["ts"] > 1e9
    assert [e.type for e in read_log(path)] == ["x.one", "x.two"]


def _terminal_ctrl_c(harness: subprocess.Popen[str]) -> None:
    """What Ctrl-C at a terminal does: SIGINT to the whole foreground process group."""
    os.killpg(harness.pid, signal.SIGINT)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("stop", "code"),
    [
        (lambda h: h.send_signal(signal.SIGTERM), 128 + signal.SIGTERM),
        (_terminal_ctrl_c, 130),
    ],
    ids=["sigterm", "ctrl-c"],
)
def test_a_signal_stops_a_dask_run_and_resume_finishes_it(
    tmp_path: Path, barrier: Path, stop: Any, code: int
) -> None:
    """Stopped either way, the harness says how to go on in one line: no worker process
    prints a traceback (local workers ignore the terminal's SIGINT; the harness owns them)."""
    out = tmp_path / "run"
    env = pythonpath_env(TESTS)
    with _held_run(
        barrier, "--provider", "mockmed", "--arm", "dask_arms:BarrierArm", "--trials", "1",
        "--concurrency", "4", "--executor", "dask-local:2", "--out", str(out), "-q", env=env,
    ) as harness:  # fmt: skip
        stop(harness)
        _, err = harness.communicate(timeout=240)
    assert harness.returncode == code, err
    assert f"effectbench run --resume {out}" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert len(_terminals(out / "events.jsonl")) < 9
    (barrier / "go").touch()
    done = _cli("run", "--resume", str(out), "--executor", "dask-local:2", "-q", env=env)
    assert done.returncode == 0, done.stderr
    counts = _terminals(out / "events.jsonl")
    assert len(counts) == 9 and set(counts.values()) == {1}, counts
    _sound(out)


@pytest.mark.parametrize("arm", ["browser_screen_only", "node_effect_verified"])
def test_an_arm_holding_a_harness_resource_is_refused_off_the_local_executor(
    tmp_path: Path, arm: str
) -> None:
    out = tmp_path / "r"
    proc = _cli("run", "--executor", "dask-local:2", "--arm", arm, "--out", str(out), "-q")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--executor local only" in lines[0]
    assert not out.exists()


def _workers_of(harness: subprocess.Popen[str]) -> list[int]:
    """The worker processes the nannies inside the harness started (its spawned children)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            argv = (proc / "cmdline").read_bytes()
        except OSError:  # not a process, or gone
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == harness.pid and b"spawn_main" in argv:
            pids.append(int(proc.name))
    return pids


def _kill_every_worker(harness: subprocess.Popen[str], stop: threading.Event) -> None:
    """SIGKILL each worker process of the harness the moment it exists, its nannies'
    replacements too, until told to stop: the cluster ends with no worker at all."""
    while not stop.is_set():
        for pid in _workers_of(harness):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stop.wait(0.02)


@pytest.mark.timeout(300)
def test_a_run_whose_workers_all_die_ends_with_exit_5_and_resumes(
    tmp_path: Path, barrier: Path
) -> None:
    """Both workers SIGKILLed, and every replacement their nannies start: no worker is
    left. The run must end (it waited for ever), say so in one line, exit 5 and leave
    what the workers held for --resume."""
    out = tmp_path / "run"
    env = pythonpath_env(TESTS)
    with _held_run(
        barrier, "--provider", "mockmed", "--arm", "dask_arms:BarrierArm", "--trials", "1",
        "--concurrency", "4", "--executor", "dask-local:2", "--worker-timeout", "3",
        "--out", str(out), "-q", env=env,
    ) as harness:  # fmt: skip
        stop = threading.Event()
        killer = threading.Thread(target=_kill_every_worker, args=(harness, stop))
        killer.start()
        try:
            _, err = harness.communicate(timeout=150)  # a hang fails here
        finally:
            stop.set()
            killer.join()
    assert harness.returncode == 5, err
    assert "the Dask workers died (no live worker for 3s)" in err, err
    assert f"effectbench run --resume {out}" in err and "Traceback" not in err, err
    events = list(read_log(out / "events.jsonl"))
    abandoned = {str(ev.ep) for ev in events if ev.type == "episode.abandoned"}
    assert abandoned and abandoned.isdisjoint(_terminals(out / "events.jsonl"))
    assert all(n == 1 for n in _terminals(out / "events.jsonl").values())
    assert events[-1].type == "run.finished" and events[-1].data["interrupted"] is True
    _not_sound(out)
    (barrier / "go").touch()
    done = _cli("run", "--resume", str(out), "--executor", "dask-local:2", "-q", env=env)
    assert done.returncode == 0, done.stderr
    counts = _terminals(out / "events.jsonl")
    assert len(counts) == 9 and set(counts.values()) == {1}, counts
    assert abandoned <= set(counts)
    _sound(out)


@pytest.mark.timeout(300)
def test_a_user_scheduler_that_disappears_ends_the_run_with_exit_5(
    tmp_path: Path, barrier: Path
) -> None:
    """The user's own `dask scheduler` process SIGKILLed mid-run, its worker left alive:
    the harness must not wait for it for ever."""
    env = pythonpath_env(TESTS)
    dask = Path(sys.executable).with_name("dask")
    info = tmp_path / "scheduler.json"
    common: dict[str, Any] = {
        "env": env,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
    }
    sched = subprocess.Popen(
        [str(dask), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(info)],
        **common,
    )  # fmt: skip
    worker: subprocess.Popen[bytes] | None = None
    try:
        _wait_for("the scheduler", info.exists)
        _wait_for("the scheduler's address", lambda: b"address" in info.read_bytes())
        address = orjson.loads(info.read_bytes())["address"]
        worker = subprocess.Popen(
            [str(dask), "worker", "--scheduler-file", str(info), "--nthreads", "4",
             "--no-dashboard", "--host", "127.0.0.1"],
            **common,
        )  # fmt: skip
        with distributed.Client(address, set_as_default=False) as client:
            client.wait_for_workers(1, timeout=120)  # the run's clock starts with a worker
        out = tmp_path / "run"
        with _held_run(
            barrier, "--provider", "mockmed", "--arm", "dask_arms:BarrierArm", "--trials", "1",
            "--concurrency", "4", "--executor", address.replace("tcp://", "dask://"),
            "--worker-timeout", "3", "--out", str(out), "-q", env=env,
        ) as harness:  # fmt: skip
            sched.kill()
            _, err = harness.communicate(timeout=150)  # a hang fails here
    finally:
        for proc in (worker, sched):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert harness.returncode == 5, err
    assert f"the Dask scheduler at {address} died (unreachable for 3s)" in err, err
    assert f"effectbench run --resume {out}" in err and "Traceback" not in err, err
    assert any(ev.type == "episode.abandoned" for ev in read_log(out / "events.jsonl"))
    assert all(n == 1 for n in _terminals(out / "events.jsonl").values())
    _not_sound(out)


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_a_bad_worker_timeout_is_one_line(tmp_path: Path, value: str) -> None:
    done = _cli("run", "--worker-timeout", value, "--out", str(tmp_path / "r"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--worker-timeout must be a finite, positive" in lines[0], lines
    assert not (tmp_path / "r").exists()
