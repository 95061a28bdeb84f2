"""The harness's browser arms on I Hate Money: Chromium signs in, fills the bill form
(selects and checkboxes by label), presses a bill's delete button twice (the page asks
first) and reads the flash and the bill pages through the fault proxy; each browser arm
scores what its HTTP twin scores on these tasks (docs/results-ihatemoney.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from effectbench_ihatemoney import IHateMoneyProvider
from effectbench_ihatemoney.tasks import task_id
from run_files import labels

from effectbench.api import evaluate_provider_async
from effectbench.arms.browser import BrowserEffectVerifiedArm, BrowserScreenOnlyArm

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]


async def test_browser_arms_score_as_their_http_twins_on_the_ledger(tmp_path: Path) -> None:
    chosen = [
        task_id("expense", "phantom"),
        task_id("amount", "homonym_4_5"),
        task_id("remove", "ok"),
    ]
    result = await evaluate_provider_async(
        [BrowserScreenOnlyArm(), BrowserEffectVerifiedArm()],
        IHateMoneyProvider(tmp_root=tmp_path),
        trials=1,
        concurrency=3,
        task_globs=chosen,
        out=tmp_path / "run",
        provider_timeout=300,
    )
    got = labels(result.run_dir)
    expected = {
        (chosen[0], "screen_only"): ("ABSENT", "SILENT_WRONG_EFFECT"),
        (chosen[0], "effect_verified"): ("ABSENT", "SAFE_HALT"),
        (chosen[1], "screen_only"): ("WRONG_PERSISTED", "SILENT_WRONG_EFFECT"),
        (chosen[1], "effect_verified"): ("WRONG_PERSISTED", "WRONG_ACTION"),
        (chosen[2], "screen_only"): ("CORRECT", "SUCCESS"),
        (chosen[2], "effect_verified"): ("CORRECT", "SUCCESS"),
    }
    assert len(got) == 6  # every episode scored: no environment failure
    for (task, arm), want in expected.items():  # the HTTP twins' labels on these tasks
        assert got[(task, f"browser_{arm}")] == want, (task, arm, got)
