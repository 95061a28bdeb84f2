"""The harness's browser arms on Roundup: Chromium logs in, fills the item form and
reads the banner (and the issue pages) through the fault proxy, and each browser arm
scores what its HTTP twin scores (pinned here; the results doc compares the full pack).
Two tasks, browser arms only: Roundup episodes in a browser are the suite's slowest."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from effectbench_roundup import RoundupProvider
from effectbench_roundup.tasks import task_id

from effectbench.api import evaluate_provider_async
from effectbench.arms.browser import BrowserEffectVerifiedArm, BrowserScreenOnlyArm

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]


async def test_browser_arms_score_as_their_http_twins_on_roundup(tmp_path: Path) -> None:
    """A phantom success banner (C3) and a stripped message part (C1): screen_only is
    fooled in the browser as over HTTP; effect_verified reads the issue pages and halts."""
    chosen = [task_id("csrf", "open", "phantom"), task_id("csrf", "status", "partial_note")]
    result = await evaluate_provider_async(
        [BrowserScreenOnlyArm(), BrowserEffectVerifiedArm()],
        RoundupProvider(tmp_root=tmp_path),
        trials=1,
        concurrency=4,
        task_globs=chosen,
        out=tmp_path / "run",
        provider_timeout=300,
    )
    rows = [orjson.loads(x) for x in (result.run_dir / "results.jsonl").read_bytes().splitlines()]
    got = {(r["task_id"], r["arm"]): (r["true_state"], r["outcome"]) for r in rows}
    assert all(r["failure_class"] is None for r in rows), rows
    expected = {
        (chosen[0], "screen_only"): ("ABSENT", "SILENT_WRONG_EFFECT"),
        (chosen[0], "effect_verified"): ("ABSENT", "SAFE_HALT"),
        (chosen[1], "screen_only"): ("WRONG_PERSISTED", "SILENT_WRONG_EFFECT"),
        (chosen[1], "effect_verified"): ("WRONG_PERSISTED", "WRONG_ACTION"),
    }
    for (task, arm), labels in expected.items():  # the HTTP twins' labels on these tasks
        assert got[(task, f"browser_{arm}")] == labels, (task, arm)
    shots = [x for x in result.log_path.read_bytes().splitlines() if b'"episode.screenshot"' in x]
    # two per browser submit (effect_verified submits once too): the filled form, then after
    assert len(shots) == 8
    labels: dict[str, list[str]] = {}
    for line in map(orjson.loads, shots):
        labels.setdefault(line["ep"], []).append(line["data"]["label"])
    assert list(labels.values()) == [["form filled, before submit", "after submit"]] * 4
