"""Resume semantics: live figures share the total's base, a finished run's resume is a
no-op that says so, and a resume keeps the recorded concurrency."""

from __future__ import annotations

import hashlib
import io
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import orjson
from cli_env import TESTS, pythonpath_env

from effectbench.api import evaluate_provider, execute
from effectbench.cli.console import PlainProgress
from effectbench.core.events import TERMINAL_TYPES
from effectbench.testing import InMemoryProvider, ScriptedArm, run_cli


def _cut_after_terminals(log: Path, n: int) -> None:
    """Keep the log up to its ``n``-th terminal event: a run killed there (a valid prefix)."""
    lines = log.read_bytes().splitlines(keepends=True)
    seen = 0
    for i, line in enumerate(lines):
        if orjson.loads(line)["type"] in TERMINAL_TYPES:
            seen += 1
            if seen == n:
                log.write_bytes(b"".join(lines[: i + 1]))
                return
    raise AssertionError(f"fewer than {n} terminal events in {log}")


def test_progress_after_a_resume_counts_the_resumed_episodes(tmp_path: Path) -> None:
    run = evaluate_provider(
        [ScriptedArm()], InMemoryProvider(("ok", "phantom")), trials=4, out=tmp_path / "run"
    )
    _cut_after_terminals(run.log_path, 5)
    stream = io.StringIO()

    async def go() -> Any:
        return await execute(
            provider=InMemoryProvider(("ok", "phantom")),
            arms=[ScriptedArm()],
            resume=run.run_dir,
            observer=PlainProgress(stream),
        )

    result = anyio.run(go)
    swer = result.metrics["arms"]["scripted"]["swer"]
    assert (swer["numerator"], swer["denominator"]) == (4, 8)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "running 8 episodes (5 already done)"
    assert lines[-1].startswith("[8/8] ") and lines[-1].endswith("SWER scripted 4/8"), lines


FAKE = [
    "--provider",
    "effectbench.testing:InMemoryProvider",
    "--arm",
    "effectbench.testing:ScriptedArm",
    "--trials",
    "3",
]


_cli = partial(run_cli, env=pythonpath_env(TESTS))


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in (run_dir / "events.jsonl").read_bytes().splitlines()]


def test_resuming_a_finished_run_is_a_no_op_that_says_so(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = _cli("run", *FAKE, "--out", str(run_dir), "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    log = run_dir / "events.jsonl"
    before = hashlib.sha256(log.read_bytes()).hexdigest()
    run_id = _events(run_dir)[0]["data"]["run_id"]
    again = _cli("run", "--resume", str(run_dir), "-q", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"run {run_id} is already complete; nothing to resume" in again.stdout
    assert hashlib.sha256(log.read_bytes()).hexdigest() == before


def test_a_resume_keeps_the_recorded_concurrency_unless_given(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = _cli("run", *FAKE, "--concurrency", "3", "--out", str(run_dir), "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    _cut_after_terminals(run_dir / "events.jsonl", 1)
    kept = _cli("run", "--resume", str(run_dir), "-q", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    (resumed,) = [e for e in _events(run_dir) if e["type"] == "run.resumed"]
    assert resumed["data"]["concurrency"] == 3
    _cut_after_terminals(run_dir / "events.jsonl", 1)
    given = _cli("run", "--resume", str(run_dir), "--concurrency", "5", "-q", cwd=tmp_path)
    assert given.returncode == 0, given.stderr
    (resumed,) = [e for e in _events(run_dir) if e["type"] == "run.resumed"]
    assert resumed["data"]["concurrency"] == 5
