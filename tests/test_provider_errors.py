"""A provider's provision() exception reaches stderr: the first of each distinct error
with its traceback, the repeats counted, while the log keeps the one-line reason."""

from __future__ import annotations

from pathlib import Path

import orjson
from cli_env import TESTS, pythonpath_env

from effectbench.testing import InMemoryProvider, run_cli


def failing_and_ok() -> InMemoryProvider:
    return InMemoryProvider(("provision_fails", "ok"))


def test_first_provider_error_shows_its_traceback_and_the_rest_are_counted(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_cli(
        "run",
        "--provider",
        f"{__name__}:failing_and_ok",
        "--arm",
        "effectbench.testing:ScriptedArm",
        "--trials",
        "3",
        "--out",
        str(run_dir),
        env=pythonpath_env(TESTS),
        cwd=tmp_path,
    )
    err = proc.stderr
    assert err.count("Traceback (most recent call last)") == 1, err
    assert "ConnectionError: database container did not come up" in err
    assert "in provision" in err  # the provider's own frame is shown
    assert "occurred 2 more time(s)" in err, err
    events = [orjson.loads(x) for x in (run_dir / "events.jsonl").read_bytes().splitlines()]
    failed = [e for e in events if e["type"] == "episode.failed"]
    assert len(failed) == 3
    assert all("Traceback" not in orjson.dumps(e).decode() for e in failed)
