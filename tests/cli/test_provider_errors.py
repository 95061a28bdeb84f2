"""A provider's provision() exception reaches stderr: the first of each distinct error
with its traceback, the repeats counted; the log keeps the traceback once too, on the
first episode.failed of that error, and the one-line reason on every one. The
traceback is printed without any frame's locals (they can hold secrets), plain when
stderr is not a terminal, so neither the checkout's path length nor the terminal's
width can break a line of it."""

from __future__ import annotations

import os
import pty
import subprocess
from collections.abc import Mapping
from pathlib import Path

import orjson
from cli_env import TESTS, pythonpath_env

# The CLI subprocess imports plugins from this test module itself.
HERE = Path(__file__).resolve().parent

from effectbench.core.exitcodes import ExitCode
from effectbench.core.model import TaskSpec
from effectbench.core.provider import ProvisionedEpisode
from effectbench.testing import InMemoryProvider, run_cli
from effectbench.testing.cli import effectbench_command

SECRET = "sk-live-do-not-print-0123456789"


class _SecretHolding(InMemoryProvider):
    async def provision(
        self, task: TaskSpec, trial: int, params: Mapping[str, str]
    ) -> ProvisionedEpisode:
        api_key = SECRET  # a local of the failing frame: must never reach the terminal
        assert api_key
        return await super().provision(task, trial, params)


def failing_and_ok() -> InMemoryProvider:
    return _SecretHolding(("provision_fails", "ok"))


def _run_args(run_dir: Path) -> list[str]:
    return [
        "run",
        "--provider",
        f"{__name__}:failing_and_ok",
        "--arm",
        "effectbench.testing:ScriptedArm",
        "--trials",
        "3",
        "--out",
        str(run_dir),
    ]


def test_first_provider_error_shows_its_traceback_and_the_rest_are_counted(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # a narrow terminal width: a drawn traceback would wrap its lines at it
    proc = run_cli(*_run_args(run_dir), env=pythonpath_env(TESTS, HERE, COLUMNS="30"), cwd=tmp_path)
    err = proc.stderr
    assert err.count("Traceback (most recent call last)") == 1, err
    assert "ConnectionError: database container did not come up" in err
    # the provider's own frame, on one line as Python prints it
    assert any(
        line.strip().startswith('File "') and line.rstrip().endswith("in provision")
        for line in err.splitlines()
    ), err
    assert SECRET not in err, err
    assert "occurred 2 more time(s)" in err, err
    events = [orjson.loads(x) for x in (run_dir / "events.jsonl").read_bytes().splitlines()]
    failed = [e["data"] for e in events if e["type"] == "episode.failed"]
    assert len(failed) == 3
    # the log holds the traceback once, on the first episode the error ended
    (first, *rest) = sorted(failed, key=lambda d: "traceback" not in d)
    assert first["traceback"].startswith("Traceback (most recent call last)")
    assert "in provision" in first["traceback"] and SECRET not in first["traceback"]
    assert first["traceback"].rstrip().endswith("database container did not come up")
    assert all("traceback" not in d and d["error"] == first["error"] for d in rest)


def test_a_terminal_sees_the_traceback_without_locals(tmp_path: Path) -> None:
    """On a terminal the traceback may be drawn, but never with the frames' locals."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*effectbench_command(), *_run_args(tmp_path / "run")],
            cwd=tmp_path,
            env=pythonpath_env(TESTS, HERE),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=follower,
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        # a third of the episodes fail to provision: the run measured too little (exit 3)
        assert proc.wait(timeout=120) in (ExitCode.OK, ExitCode.INCOMPLETE)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    err = b"".join(chunks).decode(errors="replace")
    assert "database container did not come up" in err, err
    assert SECRET not in err, err


def teardown_fails() -> InMemoryProvider:
    return InMemoryProvider(("teardown_fails",))


def test_a_teardown_error_shows_its_traceback_once_with_v_and_in_the_log(tmp_path: Path) -> None:
    """A provider that crashes in teardown on every episode: without -v the console says
    nothing of it but the count; with -v the first one's traceback, once; the log holds
    it once, on the first failed episode."""
    args = [*_run_args(tmp_path / "quiet")]
    args[args.index("--provider") + 1] = f"{__name__}:teardown_fails"
    quiet = run_cli(*args, env=pythonpath_env(TESTS, HERE), cwd=tmp_path)
    assert "Traceback" not in quiet.stderr, quiet.stderr
    assert "occurred 2 more time(s)" in quiet.stderr, quiet.stderr
    args[args.index("--out") + 1] = str(tmp_path / "loud")
    loud = run_cli("-v", *args, env=pythonpath_env(TESTS, HERE), cwd=tmp_path)
    assert loud.stderr.count("Traceback (most recent call last)") == 1, loud.stderr
    assert "in teardown" in loud.stderr, loud.stderr
    lines = (tmp_path / "loud" / "events.jsonl").read_bytes().splitlines()
    failed = [e["data"] for e in map(orjson.loads, lines) if e["type"] == "episode.failed"]
    assert [d["stage"] for d in failed] == ["teardown"] * 3
    assert sum("traceback" in d for d in failed) == 1
