"""A provider's provision() exception reaches stderr: the first of each distinct error
with its traceback, the repeats counted, while the log keeps the one-line reason. The
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
    failed = [e for e in events if e["type"] == "episode.failed"]
    assert len(failed) == 3
    assert all("Traceback" not in orjson.dumps(e).decode() for e in failed)


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
