"""Crash safety: a real `effectbench run` killed (SIGKILL) or interrupted (SIGINT) mid-run,
then resumed, ends with exactly the results of an uninterrupted run, no episode twice."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from effectbench.api import evaluate
from effectbench.core.events import TERMINAL_TYPES
from effectbench.log.reader import read_log, verify_log
from effectbench.testing import effectbench_command, run_cli, untimed_run

ARGS = ["--trials", "2", "--concurrency", "2", "-q"]
N_EPISODES = 2 * 9 * 2


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[object, object]]:
    run = evaluate(
        ["screen_only", "effect_verified"],
        trials=2,
        concurrency=8,
        out=tmp_path_factory.mktemp("base") / "run",
    )
    return run.run_dir, untimed_run(run.run_dir)


def _lines(log: Path) -> int:
    try:
        return log.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _start_and_stop_after(out: Path, n_events: int, sig: int) -> subprocess.Popen[str]:
    """Start a run and send ``sig`` once the log holds at least ``n_events`` lines."""
    proc = subprocess.Popen(
        [*effectbench_command(), "run", *ARGS, "--out", str(out)],
        cwd=out.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = out / "events.jsonl"
    deadline = time.monotonic() + 60
    while _lines(log) < n_events:
        assert proc.poll() is None, f"run ended before {n_events} events: {proc.communicate()}"
        assert time.monotonic() < deadline, "run made no progress"
        time.sleep(0.001)
    os.kill(proc.pid, sig)
    proc.wait(timeout=60)
    return proc


def _assert_each_episode_ended_once(log: Path) -> None:
    ended: Counter[str] = Counter()
    for ev in read_log(log):
        if ev.type == "episode.abandoned":
            assert ev.ep is not None and ended[ev.ep] == 0, f"{ev.ep} abandoned after it ended"
        elif ev.type in TERMINAL_TYPES and ev.ep is not None:
            ended[ev.ep] += 1
    assert len(ended) == N_EPISODES and set(ended.values()) == {1}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("n_events", [2, 90, 250])
def test_sigkill_then_resume_equals_an_uninterrupted_run(
    tmp_path: Path, baseline: tuple[Path, tuple[object, object]], n_events: int
) -> None:
    out = tmp_path / "run"
    killed = _start_and_stop_after(out, n_events, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    assert not (out / "results.jsonl").exists()

    resumed = run_cli("run", "--resume", str(out), "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"run directory: {out}" in resumed.stdout

    log = out / "events.jsonl"
    assert verify_log(log).ok
    types = [e.type for e in read_log(log)]
    assert types.count("run.started") == 1 and types.count("run.resumed") == 1
    _assert_each_episode_ended_once(log)
    results, metrics = untimed_run(out)
    base_results, base_metrics = baseline[1]
    assert results == base_results
    assert metrics == base_metrics


@pytest.mark.timeout(120)
def test_sigint_stops_gracefully_and_leaves_a_resumable_log(
    tmp_path: Path, baseline: tuple[Path, tuple[object, object]]
) -> None:
    out = tmp_path / "run"
    proc = _start_and_stop_after(out, 120, signal.SIGINT)
    _, stderr = proc.communicate()
    assert proc.returncode == 130, stderr
    assert f"--resume {out}" in stderr and "Traceback" not in stderr
    log = out / "events.jsonl"
    report = verify_log(log)
    assert report.ok and not report.torn_tail
    last = list(read_log(log))[-1]
    assert last.type == "run.finished" and last.data["interrupted"] is True

    resumed = run_cli("run", "--resume", str(out), "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    _assert_each_episode_ended_once(log)
    assert untimed_run(out) == baseline[1]


def test_resuming_a_finished_run_adds_nothing(
    tmp_path: Path, baseline: tuple[Path, tuple[object, object]]
) -> None:
    import shutil

    run_dir = tmp_path / "done"
    shutil.copytree(baseline[0], run_dir)
    before = (run_dir / "events.jsonl").read_bytes()
    proc = run_cli("run", "--resume", str(run_dir), "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "is already complete; nothing to resume" in proc.stdout
    assert (run_dir / "events.jsonl").read_bytes() == before
    events = list(read_log(run_dir / "events.jsonl"))
    assert not [e for e in events if e.type == "run.resumed"]
    assert sum(1 for e in events if e.type == "episode.planned") == N_EPISODES
    assert untimed_run(run_dir) == baseline[1]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--trials", "3"], "trials: recorded 2, now 3"),
        (["--arm", "screen_only"], "arms: recorded screen_only, effect_verified, now screen_only"),
        (["--task", "mockmed::ok"], "tasks: missing now: mockmed::partial"),
    ],
)
def test_a_resume_with_a_different_plan_is_refused(
    tmp_path: Path, baseline: tuple[Path, tuple[object, object]], extra: list[str], named: str
) -> None:
    before = (baseline[0] / "events.jsonl").read_bytes()
    proc = run_cli("run", "--resume", str(baseline[0]), *extra, cwd=tmp_path)
    assert proc.returncode == 2
    assert "refusing to resume" in proc.stderr and named in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert (baseline[0] / "events.jsonl").read_bytes() == before


def test_a_resume_with_an_upgraded_arm_is_refused(tmp_path: Path) -> None:
    """An arm's code is part of the plan: mixing two versions of it in one run is refused."""
    import attrs
    import orjson

    from effectbench.api import RunError, evaluate_provider
    from effectbench.testing import InMemoryProvider, ScriptedArm

    @attrs.define
    class Versioned(ScriptedArm):
        version: str = "1.0"

    out = tmp_path / "run"
    evaluate_provider([Versioned()], InMemoryProvider(("ok",)), trials=1, out=out)
    recorded = orjson.loads((out / "events.jsonl").read_bytes().splitlines()[0])["data"]["plan"]
    assert recorded["arm_versions"] == {"scripted": "1.0"}
    evaluate_provider(
        [Versioned()], InMemoryProvider(("ok",)), trials=1, resume=out
    )  # same code: fine
    with pytest.raises(RunError, match=r"arm scripted version: recorded '1.0', now '2.0'"):
        evaluate_provider([Versioned("2.0")], InMemoryProvider(("ok",)), trials=1, resume=out)


def test_named_plugins_record_the_distribution_behind_them(tmp_path: Path) -> None:
    """Entry-point metadata names the code: the provider's distribution in the manifest and
    each arm's ``dist==version`` in the plan (so an upgrade between kill and resume shows)."""
    import orjson

    from effectbench import __version__
    from effectbench.api import evaluate_provider

    out = tmp_path / "run"
    evaluate_provider(["screen_only"], "mockmed", trials=1, out=out, task_globs=["mockmed::ok"])
    plan = orjson.loads((out / "events.jsonl").read_bytes().splitlines()[0])["data"]["plan"]
    assert plan["arm_versions"] == {"screen_only": f"effectbench=={__version__}"}
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["provider"]["distribution"] == "effectbench"
