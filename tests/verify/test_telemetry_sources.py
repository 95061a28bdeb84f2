"""Telemetry stays honest: null is "no source", 0 is "counted none"; model-call
latencies per call and per arm; costs priced by a harness price table (``--prices``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from effectbench.api import evaluate_provider_async
from effectbench.audit.attest import attestations
from effectbench.core.arm import TaskView
from effectbench.core.model import AgentReport
from effectbench.core.prices import PriceTableError
from effectbench.core.provider import EnvHandle, ModelCall
from effectbench.outputs.artifacts import recompute_metrics_from_results, rescore_artifacts
from effectbench.testing import InMemoryProvider, NoopArm, run_cli
from effectbench.verify.run_check import verify_run

PRICES = {"version": "t-1", "models": {"m1": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}}


class SilentArm(NoopArm):
    """Records nothing at all and trusts nothing: it reports failure."""

    name = "silent"


class IdleActorArm(NoopArm):
    """Declares that it records every action it takes, and took none: 0, not null."""

    name = "idle_actor"
    records_actions = True


class IdleModelArm(NoopArm):
    """A model arm that decided without calling its model: it counts, and counted none."""

    name = "idle_model"
    uses_model = True


class CallingArm:
    """Three model calls with known latencies: one priced by itself, two left to the table
    (one of a model the table does not know)."""

    name = "calling"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        t = env.telemetry
        t.model_call(ModelCall(100, 10, latency_ms=10.0 + task.trial, model="m1"))
        t.model_call(ModelCall(50, 5, latency_ms=30.0, model="m1"))
        t.model_call(ModelCall(7, 1, latency_ms=20.0, model="unpriced", cost_usd=None))
        return AgentReport(reported_success=False, halted=True)


class BilledArm:
    """Its endpoint reports the cost: the table never replaces it."""

    name = "billed"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        env.telemetry.model_call(
            ModelCall(100, 10, cost_usd=0.5, cost_source="arm", latency_ms=5.0, model="m1")
        )
        return AgentReport(reported_success=False, halted=True)


def _run(tmp_path: Path, arms: list[Any], trials: int = 3, **kw: Any) -> Path:
    async def go() -> Path:
        result = await evaluate_provider_async(
            arms, InMemoryProvider(), trials=trials, out=tmp_path / "run", report=False, **kw
        )
        return Path(result.run_dir)

    return anyio.run(go)


def _rows(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for line in (run_dir / "results.jsonl").read_bytes().splitlines():
        row = orjson.loads(line)
        out.setdefault(row["arm"], []).append(row)
    return out


def _metrics(run_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((run_dir / "metrics.json").read_bytes())
    return doc


def test_null_is_no_source_and_zero_is_counted_none(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, [SilentArm(), IdleModelArm(), IdleActorArm()])
    rows = _rows(run_dir)
    for row in rows["silent"]:  # drives nothing through the recorder: no source of actions
        t = row["telemetry"]
        assert t["actions"] is None
        assert (t["model_calls"], t["input_tokens"], t["cost_usd"]) == (None, None, None)
    for row in rows["idle_actor"]:  # declares it records its actions: 0, not null
        assert row["telemetry"]["actions"] == 0
    for row in rows["idle_model"]:  # declares it counts its model calls: 0, not null
        t = row["telemetry"]
        assert (t["actions"], t["model_calls"], t["input_tokens"], t["output_tokens"]) == (
            None,
            0,
            0,
            0,
        )
        assert (t["cost_usd"], t["cost_source"], t["model_call_latency_ms"]) == (0.0, "arm", [])
    tel = _metrics(run_dir)["arms"]
    assert tel["silent"]["telemetry"]["model_calls"]["count"] == 0
    assert tel["idle_model"]["telemetry"]["model_calls"] == {
        "count": 3, "mean": 0.0, "p50": 0.0, "p90": 0.0, "p95": 0.0
    }  # fmt: skip
    assert tel["idle_model"]["telemetry"]["actions"]["count"] == 0
    assert tel["idle_actor"]["telemetry"]["actions"]["mean"] == 0.0
    assert verify_run(run_dir).ok


def test_model_call_latency_is_kept_per_call_and_summarised_per_arm(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, [CallingArm(), SilentArm()])
    rows = _rows(run_dir)
    for row in rows["calling"]:
        t = row["telemetry"]
        assert t["model_call_latency_ms"] == [10.0 + row["trial"], 30.0, 20.0]
        assert t["model_latency_ms"] == pytest.approx(60.0 + row["trial"])
    assert "model_call_latency_ms" not in rows["silent"][0]["telemetry"]
    lat = _metrics(run_dir)["arms"]["calling"]["telemetry"]["model_latency_ms"]
    # nine calls: 10, 11, 12, 20 x3, 30 x3 -> median 20, p95 30
    assert (lat["count"], lat["p50"], lat["p95"]) == (9, 20.0, 30.0)
    assert _metrics(run_dir)["arms"]["silent"]["telemetry"]["model_latency_ms"]["count"] == 0
    summary = (run_dir / "summary.md").read_text()
    assert "model latency ms p50 / p95 (per call)" in summary
    assert "| calling | " in summary and " | 20 / 30 |" in summary
    # the same figures from the rows alone, and from a rescore
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert recompute_metrics_from_results(run_dir / "results.jsonl", manifest) == _metrics(run_dir)
    before = (run_dir / "metrics.json").read_bytes()
    for workers in (1, 2):  # the one-process pass and the sharded one agree
        rescore_artifacts(run_dir, workers=workers, attest=attestations)
        assert (run_dir / "metrics.json").read_bytes() == before, workers
    assert verify_run(run_dir).ok


def test_a_price_table_prices_calls_without_a_cost_and_records_its_version(
    tmp_path: Path,
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_bytes(orjson.dumps(PRICES))
    run_dir = _run(tmp_path, [CallingArm(), BilledArm()], prices=prices)
    rows = _rows(run_dir)
    for row in rows["calling"]:  # the unpriced model's call leaves the episode's cost unknown
        assert row["telemetry"]["cost_usd"] is None and row["telemetry"]["cost_source"] is None
    for row in rows["billed"]:  # the arm's own figure wins over the table
        assert (row["telemetry"]["cost_usd"], row["telemetry"]["cost_source"]) == (0.5, "arm")


def test_a_price_table_prices_every_call_it_knows(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_bytes(orjson.dumps(PRICES))

    class PricedArm(CallingArm):
        name = "priced"

        async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
            env.telemetry.model_call(ModelCall(1000, 100, latency_ms=1.0, model="m1"))
            env.telemetry.model_call(ModelCall(0, 50, latency_ms=1.0, model="m1"))
            return AgentReport(reported_success=False, halted=True)

    run_dir = _run(tmp_path, [PricedArm()], prices=prices)
    for row in _rows(run_dir)["priced"]:
        t = row["telemetry"]
        assert t["cost_source"] == "price_table:t-1"
        assert t["cost_usd"] == pytest.approx((1000 * 2.0 + 150 * 8.0) / 1e6)
    assert _metrics(run_dir)["arms"]["priced"]["telemetry"]["cost"]["eligible_with_source"] == 3


def test_a_bad_price_table_is_one_line_and_exit_2_before_anything_is_written(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "prices.json"
    bad.write_bytes(b'{"version": "v", "models": {"m": {"input_per_mtok": -1}}}')
    out = tmp_path / "never"
    for table in (bad, tmp_path / "missing.json"):
        proc = run_cli(
            "run", "--trials", "1", "--out", str(out), "-q", "--prices", str(table), timeout=60
        )
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert str(table) in lines[0] and "price table" in lines[0] or "must be" in lines[0]
        assert not out.exists()
    with pytest.raises(PriceTableError):
        _run(tmp_path, [SilentArm()], prices=bad)
