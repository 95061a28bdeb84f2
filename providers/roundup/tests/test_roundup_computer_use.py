"""The computer_use arm on Roundup over real Chromium, against the stand-in model.

The stand-in's two scripts on a few tasks, one per category where the browser arms
split (docs/results-roundup.md, "The browser arms on Roundup"), and a control: the
script that trusts Roundup's banner is fooled in each faulted category, the one that
opens the saved issue and checks it is fooled in none, and both save the control. Every
coordinate comes from the rendered page (``effectbench.testing.computer_use.sight``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from effectbench_roundup import RoundupProvider
from effectbench_roundup.tasks import task_id

from effectbench.api import evaluate_provider_async
from effectbench.arms.computer_use import ComputerUseArm
from effectbench.serve import LocalServer
from effectbench.testing.computer_use import Sight, StandIn

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

CHOSEN = {
    task_id("csrf", "status", "partial_note"): "C1_partial_save",
    task_id("csrf", "open", "phantom"): "C3_optimistic_then_reject",
    task_id("csrf", "priority", "homonym"): "C6_wrong_record_homonym",
    task_id("csrf", "note", "noop"): "C7_silent_noop_wrong_target",
    task_id("csrf", "status", "ok"): "control",
}


async def _run(tmp_path: Path) -> list[dict[str, Any]]:
    sight = Sight()
    local = LocalServer(StandIn(sight).app)
    await local.start()
    arms = [
        ComputerUseArm(
            name=name,
            base_url=f"http://127.0.0.1:{local.port}/v1",
            model=model,
            api_key="test-key",
            screen=sight.screen,
            environ={},
        )
        for name, model in (("cu_banner", "trust-banner"), ("cu_records", "check-records"))
    ]
    try:
        result = await evaluate_provider_async(
            arms, RoundupProvider(tmp_root=tmp_path), trials=1, concurrency=4,
            task_globs=list(CHOSEN), out=tmp_path / "run", provider_timeout=300, report=False,
        )  # fmt: skip
    finally:
        await local.stop()
    lines = (result.run_dir / "results.jsonl").read_bytes().splitlines()
    return [orjson.loads(x) for x in lines]


async def test_the_banner_script_is_fooled_per_category_and_the_records_script_never(
    tmp_path: Path,
) -> None:
    rows = await _run(tmp_path)
    assert len(rows) == 2 * len(CHOSEN) and all(r["failure_class"] is None for r in rows), rows
    assert {r["task_id"]: r["category"] for r in rows} == CHOSEN
    swer: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (r["arm"], r["category"])
        swer[key] = swer.get(key, 0) + (r["outcome"] == "SILENT_WRONG_EFFECT")
    for category in CHOSEN.values():
        faulted = category != "control"
        assert swer[("cu_banner", category)] == int(faulted), (category, rows)
        assert swer[("cu_records", category)] == 0, (category, rows)
    outcome = {(r["arm"], r["task_id"]): r["outcome"] for r in rows}
    control = task_id("csrf", "status", "ok")
    assert outcome[("cu_banner", control)] == outcome[("cu_records", control)] == "SUCCESS"
    halted = {o for (arm, _), o in outcome.items() if arm == "cu_records"} - {"SUCCESS"}
    assert halted <= {"SAFE_HALT", "WRONG_ACTION"}  # it halted where the write went wrong
