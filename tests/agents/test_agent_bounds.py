"""Issue 25, item 3: an arm's reported numbers are bounded, the folds cannot overflow, and
what an arm puts into the log per episode has a byte budget. One arm's valid but hostile
messages fail that arm's episodes, never the run or another arm's results."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from effectbench.agents import ExecArm, protocol
from effectbench.api import evaluate_provider_async
from effectbench.core import bounds
from effectbench.core.agentlog import DEFAULT_LOG_BUDGET, LogBudgetExceeded
from effectbench.core.arm import TaskView
from effectbench.core.exitcodes import ExitCode
from effectbench.core.model import AgentReport
from effectbench.core.prices import PriceTableError, parse_prices
from effectbench.core.provider import EnvHandle, ModelCall
from effectbench.core.rundir import RunDir
from effectbench.log.reader import read_log
from effectbench.testing import InMemoryProvider, NoopArm, ScriptedArm, run_cli, untimed_run

REPLAY = Path(__file__).resolve().parents[1] / "agents" / "replay_agent.py"
HUGE = 1e308


def _messages(path: Path, messages: list[Any]) -> Path:
    path.write_bytes(orjson.dumps(messages))
    return path


def _failures(log: Path) -> dict[str, str]:
    return {e.ep: e.data["error"] for e in read_log(log) if e.type == "episode.failed" and e.ep}


# --------------------------------------------------------------------------- number bounds


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        ("cost_usd", 0, True),
        ("cost_usd", bounds.MAX_COST_USD, True),
        ("cost_usd", HUGE, False),
        ("cost_usd", float("inf"), False),
        ("cost_usd", float("nan"), False),
        ("cost_usd", True, False),
        ("latency_ms", bounds.MAX_LATENCY_MS, True),
        ("latency_ms", HUGE, False),
        ("latency_ms", -1.0, False),
        ("input_tokens", bounds.MAX_TOKENS, True),
        ("input_tokens", bounds.MAX_TOKENS + 1, False),
        ("output_tokens", 10**400, False),
        ("output_tokens", 2.0, False),
        ("output_tokens", None, True),
    ],
)
def test_each_reported_number_has_a_range(key: str, value: object, ok: bool) -> None:
    message = {"type": "model_call", "episode_id": "e", key: value}
    why = protocol.problem(message)
    assert (why is None) is ok, why
    if not ok:
        assert why is not None and key in why and "0.." in why


def test_logged_numbers_outside_their_range_are_unknown_and_sums_never_raise() -> None:
    assert bounds.logged(3) == 3 and bounds.logged(2.5) == 2.5
    assert [bounds.logged(v) for v in (HUGE, -1, True, "3", None, float("nan"))] == [None] * 6
    assert bounds.safe_fsum([HUGE, HUGE]) is None and bounds.safe_fsum([1.0, 2.0]) == 3.0
    with pytest.raises(PriceTableError, match="at most 10000 USD per 1M tokens"):
        parse_prices({"version": "v", "models": {"m": {"input_per_mtok": HUGE}}}, "p.json")


def _cli_run(tmp_path: Path, name: str, *arms: str) -> Path:
    out = tmp_path / name
    flags = [a for arm in arms for a in ("--arm", arm)]
    flags += ["--trials", "1", "--no-isolate", "--no-report", "--out", str(out), "-q"]
    proc = run_cli("run", *flags, cwd=tmp_path)
    assert "internal error" not in proc.stderr, proc.stderr
    assert proc.returncode in (ExitCode.OK, ExitCode.INCOMPLETE), proc.stderr
    return out


@pytest.mark.timeout(240)
def test_two_huge_costs_fail_only_their_episode_and_every_artifact_survives(
    tmp_path: Path,
) -> None:
    """On main: OverflowError in math.fsum, exit 1, no artifacts for any arm."""
    huge = {"type": "model_call", "cost_usd": HUGE, "latency_ms": HUGE}
    script = _messages(tmp_path / "huge.json", [huge, huge])
    agent = f"exec:{sys.executable} {REPLAY} {script}"
    run = _cli_run(tmp_path, "run", agent, "screen_only")
    alone = _cli_run(tmp_path, "alone", "screen_only")

    root = RunDir(run)
    for path in (root.results, root.metrics, root.manifest, root.summary):
        assert path.is_file(), path
    failures = _failures(root.log)
    assert len(failures) == 9 and all(ep.startswith("exec:huge::") for ep in failures)
    assert all("cost_usd must be a finite number in 0..1e+06" in why for why in failures.values())

    rows, metrics = untimed_run(run)
    rows_alone, metrics_alone = untimed_run(alone)
    mine = {ep: r for ep, r in rows.items() if ep.startswith("screen_only::")}
    assert mine == rows_alone and len(mine) == 9
    assert metrics["arms"]["screen_only"] == metrics_alone["arms"]["screen_only"]

    before = root.results.read_bytes()
    rescore = run_cli("rescore", str(run), "--no-report", cwd=tmp_path)
    assert rescore.returncode == 0, rescore.stderr
    assert root.results.read_bytes() == before
    verify = run_cli("verify", str(run), cwd=tmp_path)
    assert "internal error" not in verify.stderr and "NOT sound" not in verify.stdout, verify


class _HugeCostArm(NoopArm):
    """An in-process arm whose model endpoint reported absurd figures."""

    name = "huge_cost"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        for _ in range(2):
            env.telemetry.model_call(ModelCall(input_tokens=1, cost_usd=HUGE, latency_ms=1.0))
        return AgentReport(reported_success=True, halted=False)


def test_an_in_process_arm_with_an_out_of_range_call_fails_its_episode(tmp_path: Path) -> None:
    arms = [_HugeCostArm(), ScriptedArm()]
    result = anyio.run(
        lambda: evaluate_provider_async(
            arms, InMemoryProvider(), trials=1, out=tmp_path / "r", report=False
        )
    )
    failures = _failures(RunDir(result.run_dir).log)
    assert list(failures.values()) == [
        (
            "arm 'huge_cost' recorded a model call out of range: cost_usd must be a finite "
            "number in 0..1e+06 or null, got 1e+308"
        )
    ]
    assert result.metrics["arms"]["scripted"]["coverage"] == 1.0


# --------------------------------------------------------------------------- the log budget


@pytest.mark.timeout(120)
def test_a_hundred_one_megabyte_actions_exhaust_the_budget_and_the_log_stays_small(
    tmp_path: Path,
) -> None:
    """On main: all 100 MB go into the log (and the harness's memory)."""
    action = {"type": "action", "kind": "type", "detail": {"text": "x" * 1_000_000}}
    script = _messages(tmp_path / "big.json", [{"repeat": 100, "message": action}])
    arm = ExecArm([sys.executable, str(REPLAY), str(script)], name="big", isolate=False)
    result = anyio.run(
        lambda: evaluate_provider_async(
            [arm, ScriptedArm()], InMemoryProvider(), trials=1, out=tmp_path / "r", report=False
        )
    )
    log = RunDir(result.run_dir).log
    (why,) = _failures(log).values()
    assert why == (
        "arm 'big' raised AgentOverBudget: the agent put more than 4194304 bytes into the log "
        "for one episode (at action 5; raise --agent-log-budget to allow more)"
    )
    assert log.stat().st_size < DEFAULT_LOG_BUDGET + (1 << 20)
    assert result.metrics["arms"]["scripted"]["coverage"] == 1.0


class _ChattyArm(NoopArm):
    """Records actions past the budget, swallowing the recorder's refusal."""

    name = "chatty"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        refused = 0
        for _ in range(3):
            try:
                env.telemetry.action("type", text="y" * 1000)
            except LogBudgetExceeded:
                refused += 1
        assert refused == 2
        return AgentReport(reported_success=True, halted=False)


class _LongReportArm(NoopArm):
    name = "long_report"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        return AgentReport(reported_success=True, halted=False, message="z" * 2000)


def test_in_process_arms_have_the_same_budget_even_when_they_swallow_its_refusal(
    tmp_path: Path,
) -> None:
    arms = [_ChattyArm(), _LongReportArm(), NoopArm()]
    result = anyio.run(
        lambda: evaluate_provider_async(
            arms,
            InMemoryProvider(),
            trials=1,
            out=tmp_path / "r",
            report=False,
            agent_log_budget=1024,
        )
    )
    failures = _failures(RunDir(result.run_dir).log)
    assert failures == {
        "chatty::fake::ok::t0": (
            "arm 'chatty' put more than 1024 bytes into the log for one episode (at action 2; "
            "raise --agent-log-budget to allow more)"
        ),
        "long_report::fake::ok::t0": (
            "arm 'long_report' put more than 1024 bytes into the log for one episode (at its "
            "report; raise --agent-log-budget to allow more)"
        ),
    }
    actions = [e for e in read_log(RunDir(result.run_dir).log) if e.type == "episode.action"]
    assert len(actions) == 1  # what was within the budget stays as evidence


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("lots", "must be a number of bytes such as 4194304, 512K or 4M, got 'lots'"),
        ("10", "--agent-log-budget must be from 1024 bytes (1K) to 1073741824 bytes (1G), got 10"),
    ],
)
def test_a_bad_budget_is_one_line(tmp_path: Path, value: str, message: str) -> None:
    proc = run_cli("run", "--agent-log-budget", value, "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- property


_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
_NUMBER = st.one_of(  # valid JSON and the schema's type: up to the largest finite double
    st.integers(min_value=0, max_value=2**63 - 1),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False),
    st.sampled_from([0, bounds.MAX_COST_USD, HUGE, sys.float_info.max]),  # the edges, often
)
_USAGE = {
    "input_tokens": st.integers(min_value=0, max_value=2**63 - 1),
    "output_tokens": st.integers(min_value=0, max_value=2**63 - 1),
    "cost_usd": _NUMBER,
    "latency_ms": _NUMBER,
    "model": st.text(max_size=30),
}
_VALID_MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("model_call")},
        optional={k: st.one_of(st.none(), s) for k, s in _USAGE.items()},
    ),
    st.fixed_dictionaries(
        {"type": st.just("action"), "kind": st.text(min_size=1, max_size=20)},
        optional={"detail": st.dictionaries(st.text(max_size=10), _SCALAR, max_size=4)},
    ),
    st.fixed_dictionaries(
        {"type": st.just("report"), "reported_success": st.booleans(), "halted": st.booleans()},
        optional={"message": st.text(max_size=50)},
    ),
    st.fixed_dictionaries({"type": st.just("error")}, optional={"message": st.text(max_size=50)}),
)


def _other_arm(run_dir: Path) -> tuple[dict[str, Any], Any]:
    rows, metrics = untimed_run(run_dir)
    return (
        {ep: r for ep, r in rows.items() if ep.startswith("scripted::")},
        metrics["arms"]["scripted"],
    )


def _evaluate(arms: list[Any], out: Path) -> Any:
    provider = InMemoryProvider(("ok", "phantom"))
    return anyio.run(
        lambda: evaluate_provider_async(arms, provider, trials=2, out=out, report=False)
    )


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Any]:
    """The scripted arm's results when it runs alone."""
    return _other_arm(_evaluate([ScriptedArm()], tmp_path_factory.mktemp("alone") / "r").run_dir)


@pytest.mark.timeout(600)
@settings(max_examples=25, deadline=None)
@given(messages=st.lists(_VALID_MESSAGE, max_size=12))
@example(messages=[{"type": "model_call", "cost_usd": HUGE}])
def test_any_valid_protocol_messages_leave_the_other_arms_results_intact(
    baseline: tuple[dict[str, Any], Any], messages: list[dict[str, Any]]
) -> None:
    """Messages of the protocol's types and shapes with any JSON numbers: an arm's episodes
    may fail (a number out of range is malformed), the run and the other arm may not."""
    with tempfile.TemporaryDirectory() as tmp:
        script = _messages(Path(tmp) / "messages.json", messages)
        agent = ExecArm([sys.executable, str(REPLAY), str(script)], name="replay", isolate=False)
        result = _evaluate([agent, ScriptedArm()], Path(tmp) / "r")
        root = RunDir(result.run_dir)
        assert root.results.is_file() and root.metrics.is_file() and root.manifest.is_file()
        assert _other_arm(result.run_dir) == baseline
        assert result.metrics["arms"]["replay"]["n_recorded"] == 4
