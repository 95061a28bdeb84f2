"""The llm arm against a real scripted chat-completions server, through the real scheduler.

One MockMed run holds every scripted model as its own arm (9 tasks, one trial each),
next to ``effect_verified``, so the outcome classes of each script are read from the
run's own results.jsonl, metrics.json and log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import orjson
import pytest
from effectbench_mockmed import PINNED
from llm_server import Endpoint
from run_files import log_events, results_by_mode

from effectbench.api import evaluate_provider_async
from effectbench.arms.llm import (
    Budget,
    LlmArm,
    LlmNotConfigured,
    PriceTableError,
    RetryPolicy,
    from_environment,
)
from effectbench.arms.llm.client import ChatClient, ModelEndpointError
from effectbench.core.prices import load_prices
from effectbench.provider import Telemetry
from effectbench.serve import LocalServer

PRICES = {
    "version": "test-2026",
    "models": {"solver": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}},
}
OLD_TELEMETRY_KEYS = {
    "wall_ms", "setup_ms", "model_calls", "input_tokens", "output_tokens", "cost_usd", "actions"
}  # fmt: skip


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[Endpoint, str]]:
    ep = Endpoint()
    server = LocalServer(ep.app)
    await server.start()
    try:
        yield ep, f"http://127.0.0.1:{server.port}/v1"
    finally:
        await server.stop()


async def _run_all(tmp_path: Path) -> dict[str, Any]:
    server = Endpoint()
    local = LocalServer(server.app)
    await local.start()
    try:
        url = f"http://127.0.0.1:{local.port}/v1"
        prices = tmp_path / "prices.json"
        prices.write_bytes(orjson.dumps(PRICES))
        delays: list[float] = []

        async def sleep(seconds: float) -> None:  # records the backoff instead of waiting it out
            delays.append(seconds)

        def arm(model: str, max_calls: int = 5, max_tokens: int = 10**6, name: str = "") -> LlmArm:
            return LlmArm(
                name=name or f"llm-{model}",
                base_url=url,
                model=model,
                api_key="test-key",
                prices=prices,
                budget=Budget(max_calls=max_calls, max_tokens=max_tokens, max_bad_tool_calls=3),
                retry=RetryPolicy(max_retries=2, base_s=0.25),
                sleep=sleep,
                environ={},
            )

        models = ["solver", "solver-billed", "liar", "looper", "garbage", "flaky", "storm"]
        arms: list[Any] = [arm(m) for m in models]
        arms += [
            arm("fumbler", max_calls=8),
            arm("solver", max_tokens=1500, name="llm-tokens"),
            arm("spender", max_tokens=50_000),
            arm("dropout"),
            "effect_verified",
        ]
        result = await evaluate_provider_async(
            arms, "mockmed", trials=1, out=tmp_path / "run", report=False
        )
    finally:
        await local.stop()
    return {
        "dir": result.run_dir,
        "rows": results_by_mode(result.run_dir),
        "events": log_events(result.run_dir),
        "metrics": orjson.loads((result.run_dir / "metrics.json").read_bytes()),
        "delays": delays,
        "server": server,
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One scheduler run over MockMed with every scripted model as an arm."""
    out: dict[str, Any] = anyio.run(_run_all, tmp_path_factory.mktemp("llm"))
    return out


def _by_episode(events: list[dict[str, Any]], type_: str) -> dict[str, dict[str, Any]]:
    return {e["ep"]: e["data"] for e in events if e["type"] == type_}


def _outcomes(rows: dict[str, dict[str, Any]]) -> dict[str, str | None]:
    return {mode: row["outcome"] for mode, row in rows.items()}


def test_each_scripted_model_lands_in_its_outcome_class(run: dict[str, Any]) -> None:
    rows = run["rows"]
    pinned = dict(PINNED["effect_verified"].per_mode)
    assert _outcomes(rows["effect_verified"]) == pinned
    # a model that verifies its own effect scores what effect_verified scores
    for name in ("llm-solver", "llm-solver-billed", "llm-fumbler", "llm-flaky"):
        assert _outcomes(rows[name]) == pinned, name
    # the liar claims success without acting: a phantom SWER wherever it is scored
    liar = rows["llm-liar"]
    assert {r["swer_variant"] for r in liar.values()} == {"phantom"}
    assert {r["outcome"] for r in liar.values()} == {"SILENT_WRONG_EFFECT"}
    reported = _by_episode(run["events"], "episode.reported")
    for name, reason in (
        ("llm-looper", "call budget exhausted"),
        ("llm-garbage", "3 malformed tool calls"),
    ):
        for mode, row in rows[name].items():
            assert row["halted"] is True and row["reported_success"] is False
            assert reason in reported[row["episode_id"]]["message"], (name, mode)
    for row in rows["llm-tokens"].values():
        message = reported[row["episode_id"]]["message"]
        assert message.startswith("token budget exhausted: ") and message.endswith(" > 1500")
        assert row["halted"] is True and row["telemetry"]["input_tokens"] > 1400
    assert {r["telemetry"]["model_calls"] for r in rows["llm-looper"].values()} == {5}
    assert {r["telemetry"]["model_calls"] for r in rows["llm-garbage"].values()} == {3}


def test_the_answer_that_crosses_the_token_budget_runs_none_of_its_tool_calls(
    run: dict[str, Any],
) -> None:
    events, rows = run["events"], run["rows"]
    reported = _by_episode(events, "episode.reported")
    pre = _by_episode(events, "episode.pre_snapshot")
    post = _by_episode(events, "episode.post_read")
    for mode, row in rows["llm-spender"].items():
        ep = row["episode_id"]
        message = reported[ep]["message"]
        assert message == "token budget exhausted: " + (
            f"{row['telemetry']['input_tokens'] + 100_000} tokens > 50000"
        ), mode
        assert row["halted"] is True and row["telemetry"]["model_calls"] == 1
        # its submit_form never ran: no tool call recorded, the record as it was
        tools = [e for e in events if e["ep"] == ep and e["type"] == "episode.action"]
        assert tools == [], (mode, tools)
        assert post[ep]["snapshot"] == pre[ep]["snapshot"], mode
    spent = [r for r in run["server"].requests if r["model"] == "spender"]
    assert len(spent) == 9  # one answer per episode, no second turn


def test_endpoint_failures_fail_episodes_with_one_reason(
    run: dict[str, Any],
) -> None:
    failed = _by_episode(run["events"], "episode.failed")
    for name in ("llm-storm", "llm-dropout"):
        reason = "model endpoint gave up after 3 attempts, last: HTTP 500"
        for row in run["rows"][name].values():
            assert row["failure_class"] == "agent" and row["eligible"] is False
            assert reason in failed[row["episode_id"]]["error"], failed[row["episode_id"]]
    # bounded backoff: the storm waits 0.25 then 0.5 s per episode; the 429 honours Retry-After: 7
    # (and so does the dropout after its one answered call)
    assert sorted(run["delays"]) == sorted([0.25, 0.5] * 18 + [7.0] * 9)
    retries = [
        e["data"]["detail"]
        for e in run["events"]
        if e["type"] == "episode.action" and e["data"]["kind"] == "model_retry"
    ]
    assert sorted(d["status"] for d in retries) == sorted([500] * 36 + [429] * 9)
    storm_requests = [r for r in run["server"].requests if r["model"] == "storm"]
    assert len(storm_requests) == 27


def test_telemetry_carries_tokens_latency_and_cost_with_its_source(
    run: dict[str, Any],
) -> None:
    rows, events = run["rows"], run["events"]
    for row in rows["llm-solver"].values():
        t = row["telemetry"]
        assert t["model_calls"] == 5 and t["input_tokens"] > 0 and t["output_tokens"] == 50
        assert t["model_latency_ms"] > 0
        assert t["cost_source"] == "price_table:test-2026"
        expected = (t["input_tokens"] * 2.0 + t["output_tokens"] * 8.0) / 1e6
        assert t["cost_usd"] == pytest.approx(expected)
    for row in rows["llm-solver-billed"].values():  # the endpoint's own cost wins
        assert row["telemetry"]["cost_source"] == "arm"
        assert row["telemetry"]["cost_usd"] == pytest.approx(5 * 0.0025)
    for row in rows["llm-liar"].values():  # not in the price table: cost unknown, not zero
        assert row["telemetry"]["cost_usd"] is None and row["telemetry"]["cost_source"] is None
    # an arm without a model is no source: its rows keep the old keys, model fields null
    for row in rows["effect_verified"].values():
        assert set(row["telemetry"]) == OLD_TELEMETRY_KEYS
        assert row["telemetry"]["model_calls"] is None
    # the storm completed no call, but the llm arm counts its calls: 0 calls counted; the
    # episode failed inside a call, so its tokens and cost are unknown, never a made-up 0
    for row in rows["llm-storm"].values():
        t = row["telemetry"]
        assert (t["model_calls"], t["input_tokens"], t["output_tokens"]) == (0, None, None)
        assert (t["cost_usd"], t["cost_source"], t["model_call_latency_ms"]) == (None, None, [])
    # the dropout's one answered call is counted, but the failed one it died in is not
    # known: the episode's sums are null, not the answered call's figures
    for row in rows["llm-dropout"].values():
        t = row["telemetry"]
        assert t["model_calls"] == 1 and len(t["model_call_latency_ms"]) == 1
        assert (t["input_tokens"], t["output_tokens"], t["cost_usd"]) == (None, None, None)
    dropout = run["metrics"]["arms"]["llm-dropout"]["telemetry"]["cost"]
    assert (dropout["all_recorded_usd"], dropout["all_recorded_with_source"]) == (None, 0)
    tel = _by_episode(events, "episode.telemetry")
    for ep, data in tel.items():
        has_calls = data["model_calls"] is not None
        assert ("cost_source" in data) is has_calls and ("model_latency_ms" in data) is has_calls, (
            ep
        )
        if has_calls:  # one latency per call, in call order
            assert len(data["model_call_latency_ms"]) == data["model_calls"], ep
    solver = run["metrics"]["arms"]["llm-solver"]["telemetry"]
    assert solver["cost"]["all_recorded_with_source"] == 9
    assert solver["input_tokens"]["count"] == 9 and solver["model_calls"]["mean"] == 5


def test_every_logged_event_fits_the_schema(run: dict[str, Any]) -> None:
    from schema_check import _check

    from effectbench.schema import load_event_schema

    schema = load_event_schema()
    for event in run["events"]:
        assert _check(schema, event, schema) == [], event["type"]


@pytest.mark.anyio
async def test_retry_after_is_capped_and_a_4xx_is_not_retried(
    endpoint: tuple[Endpoint, str],
) -> None:
    server, url = endpoint
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    telemetry = Telemetry()
    async with aiohttp.ClientSession() as session:
        client = ChatClient(
            session,
            base_url=url,
            model="flaky",
            api_key="test-key",
            prices=None,
            telemetry=telemetry,
            retry=RetryPolicy(max_retries=3, base_s=1.0, max_delay_s=5.0),
            sleep=sleep,
        )
        messages = [{"role": "user", "content": 'Payload (JSON): {"note": "n", "record_key": "k"}'}]
        done = await client.complete(messages, [])
        assert done.message["tool_calls"][0]["function"]["name"] == "read_base_url"
        assert delays == [5.0]  # Retry-After: 7, capped at max_delay_s
        assert telemetry.model_calls[0].cost_source is None
        wrong_key = ChatClient(
            session, base_url=url, model="solver", api_key="nope", prices=None,
            telemetry=telemetry, retry=RetryPolicy(), sleep=sleep,
        )  # fmt: skip
        with pytest.raises(ModelEndpointError, match="HTTP 401"):
            await wrong_key.complete(messages, [])
    assert delays == [5.0] and len(server.requests) == 2


def test_price_table_errors_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_bytes(
        b'{"version": "v1", "models": {"m": {"input_per_mtok": -1, "output_per_mtok": 1}}}'
    )
    with pytest.raises(
        PriceTableError, match="models.m.input_per_mtok must be a finite, non-negative"
    ):
        load_prices(bad)
    bad.write_bytes(b'{"models": {}}')
    with pytest.raises(PriceTableError, match="'version' must be a non-empty string"):
        load_prices(bad)
    with pytest.raises(PriceTableError, match="cannot read the price table"):
        load_prices(tmp_path / "missing.json")
    table = load_prices_ok(tmp_path)
    assert table.source == "price_table:v2"
    assert table.cost("m", 1_000_000, 500_000) == pytest.approx(1.0 + 1.5)
    assert table.cost("m", None, 5) is None and table.cost("other", 1, 1) is None


def load_prices_ok(tmp_path: Path) -> Any:
    good = tmp_path / "good.json"
    good.write_bytes(
        b'{"version": "v2", "models": {"m": {"input_per_mtok": 1, "output_per_mtok": 3}}}'
    )
    return load_prices(good)


@pytest.fixture
def bare_env() -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EFFECTBENCH_LLM_")}
    yield env


def test_the_entry_point_refuses_to_build_without_an_endpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("EFFECTBENCH_LLM_BASE_URL", "EFFECTBENCH_LLM_MODEL", "EFFECTBENCH_LLM_PRICES"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(
        LlmNotConfigured, match="set EFFECTBENCH_LLM_BASE_URL and EFFECTBENCH_LLM_MODEL"
    ):
        from_environment()
    monkeypatch.setenv("EFFECTBENCH_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(LlmNotConfigured, match="no model: set EFFECTBENCH_LLM_MODEL "):
        from_environment()
    monkeypatch.setenv("EFFECTBENCH_LLM_MODEL", "m")
    monkeypatch.setenv("EFFECTBENCH_LLM_PRICES", str(tmp_path / "nope.json"))
    with pytest.raises(
        LlmNotConfigured, match="EFFECTBENCH_LLM_PRICES: cannot read the price table"
    ):
        from_environment()
    monkeypatch.delenv("EFFECTBENCH_LLM_PRICES")
    arm = from_environment()
    assert (arm.name, arm.base_url, arm.model, arm.prices) == (
        "llm",
        "http://127.0.0.1:9/v1",
        "m",
        None,
    )


def test_run_with_the_llm_arm_and_nothing_configured_says_what_to_set(
    tmp_path: Path, bare_env: dict[str, str]
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "effectbench", "run", "--arm", "llm", "--out", str(tmp_path / "r")],
        check=False, capture_output=True, text=True, cwd=tmp_path, env=bare_env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "set EFFECTBENCH_LLM_BASE_URL and EFFECTBENCH_LLM_MODEL" in lines[0]
    assert not (tmp_path / "r").exists()


@pytest.mark.anyio
async def test_an_unconfigured_llm_arm_refuses_the_run_before_anything_is_written(
    tmp_path: Path,
) -> None:
    from effectbench.api import RunError

    with pytest.raises(RunError, match="set EFFECTBENCH_LLM_BASE_URL and EFFECTBENCH_LLM_MODEL"):
        await evaluate_provider_async(
            [LlmArm(name="llm-unset", environ={})], "mockmed", trials=1, out=tmp_path / "r"
        )
    assert not (tmp_path / "r").exists()


def test_the_llm_arm_lists_as_needing_its_endpoint_where_nothing_is_configured(
    tmp_path: Path,
) -> None:
    """`effectbench arms` exits 1 on a broken plugin, so an unconfigured llm arm must load;
    its row says "needs" and which variables to set (the readiness check), not "broken"."""
    bare_env = {k: v for k, v in os.environ.items() if not k.startswith("EFFECTBENCH_LLM_")}
    proc = subprocess.run(
        [sys.executable, "-m", "effectbench", "arms"],
        check=False, capture_output=True, text=True, cwd=tmp_path, env=bare_env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("llm "))
    assert " needs " in row and " broken " not in row, row
    assert "set EFFECTBENCH_LLM_BASE_URL and EFFECTBENCH_LLM_MODEL" in row, row


def test_an_episodes_cost_source_is_null_exactly_when_its_cost_is_unknown() -> None:
    from effectbench.provider import ModelCall
    from effectbench.run.episode_events import telemetry_data

    priced = ModelCall(10, 2, 0.5, 3.0, "price_table:v1")
    billed = ModelCall(1, 1, 0.25, 1.0, "arm")
    unpriced = ModelCall(1, 1, None, None, None)
    both = telemetry_data([priced, billed, priced], 0)
    assert (both["cost_usd"], both["cost_source"], both["model_latency_ms"]) == (
        1.25, "arm+price_table:v1", 7.0
    )  # fmt: skip
    partly = telemetry_data([priced, unpriced], 0)
    assert (partly["cost_usd"], partly["cost_source"], partly["model_latency_ms"]) == (
        None, None, None
    )  # fmt: skip
    assert set(telemetry_data([], 2)) == {
        "model_calls", "input_tokens", "output_tokens", "cost_usd", "actions"
    }  # fmt: skip


def test_the_model_sees_tools_from_the_env_handle_and_the_task_not_its_script(
    run: dict[str, Any],
) -> None:
    requests = [r for r in run["server"].requests if r["model"] == "solver"]
    rows = run["rows"]
    calls = [
        r["telemetry"]["model_calls"]
        for a in ("llm-solver", "llm-tokens")
        for r in rows[a].values()
    ]
    assert len(requests) == sum(calls) and sum(calls[:9]) == 45
    for body in requests:
        names = [t["function"]["name"] for t in body["tools"]]
        assert names == ["read_base_url", "submit_form", "read_records", "finish"]
        system, user = body["messages"][0], body["messages"][1]
        assert system["role"] == "system" and user["role"] == "user"
        assert "Payload (JSON)" in user["content"] and "declared effect" in user["content"]
        assert "solution" not in user["content"]
    first_form = next(
        orjson.loads(m["content"])
        for m in requests[-1]["messages"]
        if m["role"] == "tool" and m["tool_call_id"] == "call-read_base_url"
    )
    assert first_form["status"] == 200 and "name='note'" in first_form["body"]
