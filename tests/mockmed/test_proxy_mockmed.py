"""MockMed's built-in faults switched off and the same faults injected by the fault proxy
give the anchor's outcome counts, task by task, and the log shows each injected fault."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import pytest
from effectbench_mockmed.packs_proxy import PROXY_FIXTURES, PROXY_TASKS

from effectbench.api import evaluate_provider_async
from effectbench.arms.baselines import EffectVerifiedArm, ScreenOnlyArm

pytestmark = pytest.mark.anyio

TRIALS = 3


async def _outcomes(provider: str, out: Path) -> tuple[Counter[tuple[str, str, str]], Path]:
    result = await evaluate_provider_async(
        [ScreenOnlyArm(), EffectVerifiedArm()], provider, trials=TRIALS, concurrency=16, out=out
    )
    rows = [orjson.loads(x) for x in (result.run_dir / "results.jsonl").read_bytes().splitlines()]
    counts = Counter((r["arm"], r["task_id"].split("::")[1], r["outcome"]) for r in rows)
    return counts, result.run_dir / "events.jsonl"


async def test_proxied_faults_match_the_built_in_ones_task_by_task(tmp_path: Path) -> None:
    built_in, _ = await _outcomes("mockmed", tmp_path / "built-in")
    proxied, log = await _outcomes("mockmed-proxy", tmp_path / "proxied")
    assert sum(proxied.values()) == 2 * TRIALS * len(PROXY_TASKS)
    assert proxied == built_in

    injected: dict[str, set[str]] = {}
    for raw in log.read_bytes().splitlines():
        line = orjson.loads(raw)
        if line["type"] == "episode.injected":
            mode = line["ep"].split("::")[2]
            injected.setdefault(mode, set()).add(line["data"]["kind"])
            assert "<token>" in line["data"]["detail"]["path"]  # the URL secret is redacted
    for mode, fixture in PROXY_FIXTURES.items():
        fault = fixture.get("proxy.fault")  # none for ok, and for stale: the one built-in
        want = {"proxy.pass"} if fault is None else {"proxy.pass", f"proxy.{fault}"}
        assert injected[mode] == want, mode  # reads (the readback) pass verbatim
