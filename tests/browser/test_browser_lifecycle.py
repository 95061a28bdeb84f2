"""The harness's browsers die with it, episode contexts are always closed, and a run
with no browser to launch fails in one line before anything is written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from processes import DEADLINE_S, _comm, _descendants, _stat, _wait_until_gone

from effectbench.api import evaluate
from effectbench.arm import TaskView
from effectbench.browser.launch import _wrapper
from effectbench.model import AgentReport
from effectbench.provider import EnvHandle
from effectbench.testing import effectbench_command, run_cli


def test_the_launch_wrapper_kills_the_browser_when_its_parent_dies(tmp_path: Path) -> None:
    """What makes Chromium die with Playwright's driver even if the driver is SIGKILLed:
    a stand-in browser that ignores everything still dies with its parent."""
    pidfile = tmp_path / "pid"
    fake = tmp_path / "fake-browser"
    fake.write_text(
        f"#!/bin/sh\necho $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}\nexec sleep 600\n"
    )
    fake.chmod(0o700)
    wrapper = _wrapper(tmp_path, str(fake))
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, time; subprocess.Popen([{wrapper!r}]); time.sleep(600)",
        ]
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        child = int(pidfile.read_text())
        st = _stat(child)
        assert st is not None and st[0] == parent.pid
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait_until_gone({child: st[2]}) == []
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.timeout(120)
def test_a_killed_run_leaves_no_browser_process(tmp_path: Path) -> None:
    out = tmp_path / "run"
    harness = subprocess.Popen(
        [*effectbench_command(), "run", "--arm", "browser_screen_only", "--trials", "40",
         "--concurrency", "4", "--out", str(out), "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90.0
        tree: dict[int, int] = {}
        while time.monotonic() < deadline:
            log = out / "events.jsonl"
            if log.exists() and log.read_bytes().count(b'"episode.arm_started"') >= 4:
                tree = _descendants(harness.pid)
                if sum("chrom" in _comm(pid) for pid in tree) >= 3:
                    break
            time.sleep(0.05)
        names = {_comm(pid) for pid in tree}
        assert any("chrom" in n for n in names), names  # browser and renderers were running
        assert any("node" in n for n in names), names  # and Playwright's driver
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        survivors = _wait_until_gone(tree)
        assert survivors == [], [(pid, _comm(pid)) for pid in survivors]
    finally:
        harness.kill()
        harness.wait()


class _Counting:
    """Records how many contexts its browser holds when it starts, then fails on ``ok``
    (raises) and ``partial`` (runs past the episode timeout)."""

    name = "counting"
    uses_browser = True

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        assert env.browser is not None
        browser = env.browser.context.browser
        assert browser is not None
        env.telemetry.action("contexts", open=len(browser.contexts))
        if task.episode_id.endswith("::ok::t0"):
            raise RuntimeError("the arm crashed")
        if task.episode_id.endswith("::partial::t0"):
            await anyio.sleep_forever()
        return AgentReport(reported_success=False, halted=True, message="done")


@pytest.mark.timeout(120)
def test_contexts_are_closed_when_the_arm_fails_or_times_out(tmp_path: Path) -> None:
    import orjson

    run = evaluate([_Counting()], trials=1, concurrency=1, out=tmp_path / "r", episode_timeout=1.0)
    opened = []
    failed = {}
    for raw in (run.run_dir / "events.jsonl").read_bytes().splitlines():
        line = orjson.loads(raw)
        if line["type"] == "episode.action":
            opened.append(line["data"]["detail"]["open"])
        if line["type"] == "episode.failed":
            failed[line["ep"]] = line["data"]["stage"]
    assert failed == {"counting::mockmed::ok::t0": "arm", "counting::mockmed::partial::t0": "arm"}
    assert opened == [1] * 9  # each episode finds only its own context


def _no_browser_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "EFFECTBENCH_CHROMIUM"}
    (tmp_path / "empty-bin").mkdir(exist_ok=True)
    env["PATH"] = str(tmp_path / "empty-bin")
    env["PLAYWRIGHT_BROWSERS_PATH"] = str(tmp_path / "no-downloads")
    env.update(extra)
    return env


@pytest.mark.parametrize("chromium", ["", "/nowhere/chromium"])
def test_a_browser_run_without_a_browser_fails_in_one_line(tmp_path: Path, chromium: str) -> None:
    extra = {"EFFECTBENCH_CHROMIUM": chromium} if chromium else {}
    proc = run_cli(
        "run", "--arm", "browser_screen_only", "--trials", "1", "--out", str(tmp_path / "run"),
        timeout=60, env=_no_browser_env(tmp_path, **extra),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "apt-get install chromium" in lines[0] and "playwright install chromium" in lines[0]
    assert "browser_screen_only" in lines[0]
    assert not (tmp_path / "run").exists()


def test_a_browser_that_will_not_start_fails_the_run_in_one_line(tmp_path: Path) -> None:
    proc = run_cli(
        "run", "--arm", "browser_screen_only", "--trials", "1", "--out", str(tmp_path / "run"),
        "-q", timeout=60, env=_no_browser_env(tmp_path, EFFECTBENCH_CHROMIUM="/bin/false"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "failed to start" in lines[0], proc.stderr
    assert "--resume" in lines[0]


@pytest.mark.timeout(120)
def test_ctrl_c_interrupts_a_browser_run_cleanly(tmp_path: Path) -> None:
    """A terminal's Ctrl-C signals the whole process group: only the harness may get it,
    so that in-flight episodes are interrupted (resumable), not failed or mis-scored by a
    driver that died first."""
    import orjson

    out = tmp_path / "run"
    harness = subprocess.Popen(
        [*effectbench_command(), "run", "--arm", "browser_screen_only", "--trials", "40",
         "--concurrency", "4", "--out", str(out), "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90.0
        log = out / "events.jsonl"
        while time.monotonic() < deadline:
            if log.exists() and log.read_bytes().count(b'"episode.arm_started"') >= 8:
                break
            time.sleep(0.05)
        tree = _descendants(harness.pid)
        drivers = [pid for pid in tree if "node" in _comm(pid)]
        assert drivers, "no Playwright driver running"
        # out of the terminal's reach: its own session, so the group's SIGINT misses it
        assert all(os.getsid(pid) != os.getsid(harness.pid) for pid in drivers)
        os.killpg(harness.pid, signal.SIGINT)
        assert harness.wait(timeout=60) == 130
        assert _wait_until_gone(tree) == []
    finally:
        harness.kill()
        harness.wait()
    lines = [orjson.loads(x) for x in log.read_bytes().splitlines()]
    assert lines[-1]["type"] == "run.finished" and lines[-1]["data"]["interrupted"] is True
    assert not [x for x in lines if x["type"] == "episode.failed"]
    messages = {x["data"]["message"] for x in lines if x["type"] == "episode.reported"}
    refused = "screen did not confirm the save"
    assert messages <= {
        "screen says saved: Saved",
        f"{refused} (status 504): The server took too long to answer; try again",
        f"{refused} (status 401): Your session expired; sign in again",
    }


@pytest.mark.timeout(300)
def test_a_chromium_killed_under_a_browser_arm_is_an_environment_failure(tmp_path: Path) -> None:
    """Every Chromium process of the run SIGKILLed while a browser arm holds its page:
    the arm's next step fails, and the episode is the environment's failure, not the
    agent's."""
    import orjson

    barrier = tmp_path / "barrier"
    barrier.mkdir()
    tests = Path(__file__).resolve().parents[1]
    out = tmp_path / "run"
    env = {
        **os.environ,
        "EFFECTBENCH_TEST_BARRIER": str(barrier),
        "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")]),
    }
    harness = subprocess.Popen(
        [*effectbench_command(), "run", "--arm", "dask_arms:BrowserAfterBarrierArm",
         "--trials", "1", "--concurrency", "1", "--task", "mockmed::ok", "--out", str(out),
         "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 150
        while not any(barrier.glob("inflight-*")):
            assert harness.poll() is None and time.monotonic() < deadline, harness.communicate()
            time.sleep(0.02)
        chromium = []
        for pid in _descendants(harness.pid):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"chrom" in argv.lower() or b"headless_shell" in argv:
                chromium.append(pid)
        assert chromium, "no Chromium process found"
        for pid in chromium:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        (barrier / "go").touch()
        _, err = harness.communicate(timeout=120)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    events = [orjson.loads(x) for x in (out / "events.jsonl").read_bytes().splitlines()]
    (failed,) = [e["data"] for e in events if e["type"] == "episode.failed"]
    assert failed["failure_class"] == "environment", failed
    assert failed["stage"] == "browser" and "Chromium died" in failed["error"], failed
    assert "Traceback" not in err, err
