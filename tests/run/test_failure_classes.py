"""Each failure class, injected on purpose: the class, the stage, the denominators, and
that the run completes with every other episode unaffected."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from effectbench.api import RunResult, evaluate_provider
from effectbench.log.reader import read_log
from effectbench.testing import HangingArm, InMemoryProvider, RaisingArm, ScriptedArm

TRIALS = 2


def _results(result: RunResult) -> dict[str, dict[str, Any]]:
    rows = [orjson.loads(x) for x in (result.run_dir / "results.jsonl").read_bytes().splitlines()]
    return {r["episode_id"]: r for r in rows}


def _failures(result: RunResult) -> dict[str, dict[str, Any]]:
    return {e.ep: e.data for e in read_log(result.log_path) if e.type == "episode.failed" and e.ep}


def _run(tmp_path: Path, modes: tuple[str, ...], arms: list[Any], **kw: Any) -> RunResult:
    return evaluate_provider(
        arms,
        InMemoryProvider(modes),
        trials=TRIALS,
        concurrency=4,
        out=tmp_path / "run",
        oracle_backoff=0.001,
        **kw,
    )


def _assert_scored_ok(rows: dict[str, dict[str, Any]], arm: str = "scripted") -> None:
    for t in range(TRIALS):
        row = rows[f"{arm}::fake::ok::t{t}"]
        assert row["eligible"] and row["outcome"] == "SUCCESS" and row["failure_class"] is None


@pytest.mark.parametrize(
    ("mode", "failure_class", "stage"),
    [
        ("provision_fails", "environment", "provision"),
        ("teardown_fails", "environment", "teardown"),
        ("skip", "skipped", "provision"),
        ("oracle_dead", "evaluation", "pre_snapshot"),
    ],
)
def test_provider_side_failures(tmp_path: Path, mode: str, failure_class: str, stage: str) -> None:
    result = _run(tmp_path, ("ok", mode), [ScriptedArm()])
    rows, failures = _results(result), _failures(result)
    _assert_scored_ok(rows)
    for t in range(TRIALS):
        ep = f"scripted::fake::{mode}::t{t}"
        assert rows[ep]["failure_class"] == failure_class and not rows[ep]["eligible"]
        assert failures[ep]["stage"] == stage
    arm = result.metrics["arms"]["scripted"]
    assert arm["n_episodes"] == 2 * TRIALS and arm["n_eligible"] == TRIALS
    assert arm["coverage"] == pytest.approx(0.5)
    assert arm["failure_counts"][failure_class] == TRIALS
    assert arm["task_success"] == {
        **arm["task_success"],
        "numerator": TRIALS,
        "denominator": TRIALS,
    }


def test_raising_and_hanging_arms_are_agent_failures(tmp_path: Path) -> None:
    result = _run(
        tmp_path, ("ok",), [ScriptedArm(), RaisingArm(), HangingArm()], episode_timeout=0.2
    )
    rows, failures = _results(result), _failures(result)
    _assert_scored_ok(rows)
    for t in range(TRIALS):
        assert rows[f"raising::fake::ok::t{t}"]["failure_class"] == "agent"
        assert "RuntimeError: the agent crashed" in failures[f"raising::fake::ok::t{t}"]["error"]
        assert rows[f"hanging::fake::ok::t{t}"]["failure_class"] == "agent"
        assert "timeout" in failures[f"hanging::fake::ok::t{t}"]["error"]
    for arm in ("raising", "hanging"):
        block = result.metrics["arms"][arm]
        assert block["n_eligible"] == 0 and block["coverage"] == 0
        assert block["failure_counts"]["agent"] == TRIALS
        assert block["swer"]["denominator"] == 0 and block["swer"]["rate"] is None
    # what the raising arm did before it crashed is still on the record
    actions = [
        e
        for e in read_log(result.log_path)
        if e.type == "episode.action" and e.ep and e.ep.startswith("raising")
    ]
    assert len(actions) == TRIALS


def test_oracle_unreadable_once_then_readable_is_scored(tmp_path: Path) -> None:
    result = _run(tmp_path, ("oracle_flaky",), [ScriptedArm()])
    rows = _results(result)
    for t in range(TRIALS):
        ep = f"scripted::fake::oracle_flaky::t{t}"
        assert rows[ep]["eligible"] and rows[ep]["outcome"] == "SUCCESS"
        attempts = [
            e.data["attempt"]
            for e in read_log(result.log_path)
            if e.ep == ep and e.type == "episode.post_read"
        ]
        assert attempts == [0, 1]
    assert result.metrics["arms"]["scripted"]["coverage"] == 1


def test_oracle_never_readable_after_the_arm_is_evaluation(tmp_path: Path) -> None:
    result = _run(tmp_path, ("post_dead",), [ScriptedArm()], oracle_retries=2)
    failures = _failures(result)
    for t in range(TRIALS):
        ep = f"scripted::fake::post_dead::t{t}"
        assert (
            failures[ep]["failure_class"] == "evaluation" and failures[ep]["stage"] == "post_read"
        )
        assert "after 3 read(s)" in failures[ep]["error"]
    arm = result.metrics["arms"]["scripted"]
    assert arm["failure_counts"]["evaluation"] == TRIALS and arm["n_eligible"] == 0


def test_every_class_in_one_run_keeps_each_episode_to_itself(tmp_path: Path) -> None:
    modes = (
        "ok",
        "phantom",
        "provision_fails",
        "skip",
        "oracle_flaky",
        "oracle_dead",
        "teardown_fails",
    )
    result = _run(tmp_path, modes, [ScriptedArm(), RaisingArm()])
    counts = Counter(
        (r["arm"], r["failure_class"] or r["outcome"]) for r in _results(result).values()
    )
    assert counts == {
        ("scripted", "SUCCESS"): 2 * TRIALS,  # ok, oracle_flaky
        ("scripted", "SILENT_WRONG_EFFECT"): TRIALS,  # phantom
        ("scripted", "environment"): 2 * TRIALS,
        ("scripted", "skipped"): TRIALS,
        ("scripted", "evaluation"): TRIALS,
        ("raising", "agent"): 4 * TRIALS,  # every mode where the arm got to run
        ("raising", "environment"): TRIALS,
        ("raising", "skipped"): TRIALS,
        ("raising", "evaluation"): TRIALS,
    }
    assert not result.interrupted


def test_a_provider_that_cannot_start_leaves_a_resumable_log(tmp_path: Path) -> None:
    from effectbench.api import execute
    from effectbench.run.scheduler import ProviderStartError

    class Broken(InMemoryProvider):
        async def start(self) -> None:
            raise OSError("port 5432 refused")

    out = tmp_path / "run"
    with pytest.raises(ProviderStartError, match="failed to start: OSError: port 5432 refused"):
        evaluate_provider([ScriptedArm()], Broken(), trials=1, out=out)
    events = list(read_log(out / "events.jsonl"))
    assert [e.type for e in events] == ["run.started", "run.finished"] and events[-1].data[
        "interrupted"
    ]
    import anyio

    result = anyio.run(
        lambda: execute(provider=InMemoryProvider(), arms=[ScriptedArm()], resume=out)
    )
    assert result.metrics["arms"]["scripted"]["n_eligible"] == 1


class _SelfCancellingArm:
    """Awaits a helper task it cancelled itself: the CancelledError reaches the harness."""

    name = "self_cancelling"

    async def run(self, task: Any, env: Any) -> Any:
        import asyncio

        helper = asyncio.ensure_future(asyncio.sleep(10))
        helper.cancel()
        await helper  # raises CancelledError into the arm (a common agent-code bug)
        raise AssertionError("unreachable")


class _TimeoutRaisingArm:
    """Raises TimeoutError of its own (a client timeout), with no episode timeout set."""

    name = "client_timeout"

    async def run(self, task: Any, env: Any) -> Any:
        raise TimeoutError("read timed out")


def test_an_arm_raising_cancelled_or_its_own_timeout_fails_only_its_episodes(
    tmp_path: Path,
) -> None:
    result = _run(tmp_path, ("ok",), [ScriptedArm(), _SelfCancellingArm(), _TimeoutRaisingArm()])
    rows, failures = _results(result), _failures(result)
    assert not result.interrupted
    _assert_scored_ok(rows)
    for t in range(TRIALS):
        cancelled = failures[f"self_cancelling::fake::ok::t{t}"]
        assert cancelled["failure_class"] == "agent" and "CancelledError" in cancelled["error"]
        timed = failures[f"client_timeout::fake::ok::t{t}"]
        assert timed["failure_class"] == "agent"
        assert (
            "TimeoutError: read timed out" in timed["error"]
            and "episode timeout" not in timed["error"]
        )
    terminals = Counter(
        e.ep for e in read_log(result.log_path) if e.type in ("episode.finished", "episode.failed")
    )
    assert len(terminals) == 3 * TRIALS and set(terminals.values()) == {1}


def test_a_hung_provider_fails_its_episode_not_the_run(tmp_path: Path) -> None:
    """provision and oracle reads are bounded by provider_timeout: a hung provision is an
    environment failure; a hung read is an unreadable read, re-read, then scored."""
    result = _run(
        tmp_path,
        ("ok", "provision_hangs", "oracle_hangs_once"),
        [ScriptedArm()],
        provider_timeout=0.2,
    )
    rows, failures = _results(result), _failures(result)
    _assert_scored_ok(rows)
    for t in range(TRIALS):
        hung = failures[f"scripted::fake::provision_hangs::t{t}"]
        assert hung["failure_class"] == "environment" and hung["stage"] == "provision"
        assert "did not finish within 0.2s" in hung["error"]
        row = rows[f"scripted::fake::oracle_hangs_once::t{t}"]
        assert row["eligible"] and row["outcome"] == "SUCCESS"
    reads = [
        e.data["snapshot"]
        for e in read_log(result.log_path)
        if e.type == "episode.post_read" and e.ep == "scripted::fake::oracle_hangs_once::t0"
    ]
    assert [r["readable"] for r in reads] == [False, True]
    assert "oracle read did not finish within 0.2s" in reads[0]["error"]
