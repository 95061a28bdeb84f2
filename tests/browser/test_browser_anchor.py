"""The browser baselines on the MockMed anchor, through a real Chromium: the pinned
figures of their HTTP twins, the same labels at concurrency 1 and 16, screenshots
stored by hash and checked by verify, and --screenshots controlling what is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from schema_check import _check  # the schema mini-validator

from effectbench.api import evaluate
from effectbench.core import events as ev
from effectbench.core.evidence import BLOB_DIR
from effectbench.schema import load_event_schema
from effectbench.testing import untimed_run
from effectbench.verify import verify_run

# 180 browser episodes cost ~90 CPU s (docs/performance.md); on a shared machine the
# end-to-end test needs far more than the default limit.
pytestmark = pytest.mark.timeout(600)
ARMS = ["browser_screen_only", "browser_effect_verified"]


def test_the_browser_anchor_end_to_end(tmp_path: Path) -> None:
    """One run of the full anchor (10 trials, 180 browser episodes) at concurrency 16,
    checked every way: it is the expensive part, so it is built exactly once (a
    module-scoped fixture is rebuilt whenever xdist interleaves another module)."""
    run16 = tmp_path / "c16"
    evaluate(ARMS, trials=10, concurrency=16, out=run16)
    _pinned_figures(run16)
    _concurrency_1_gives_the_labels_of_concurrency_16(run16, tmp_path)
    _screenshots_are_stored_once_by_hash_and_logged_in_order(run16)
    _verify_names_a_screenshot_edited_after_the_run(run16, tmp_path)


def _rate(block: dict[str, object]) -> tuple[object, object]:
    return block["numerator"], block["denominator"]


def _pinned_figures(run16: Path) -> None:
    metrics = orjson.loads((run16 / "metrics.json").read_bytes())
    so, ev_ = metrics["arms"]["browser_screen_only"], metrics["arms"]["browser_effect_verified"]
    assert _rate(so["swer"]) == (50, 90)
    assert _rate(so["swer_wrong_write"]) == (40, 90) and _rate(so["swer_phantom"]) == (10, 90)
    assert so["outcome_counts"]["success"] == 20
    assert so["outcome_counts"]["false_abort"] == 10 and so["outcome_counts"]["safe_halt"] == 10
    assert _rate(so["screen_success"]) == (70, 90) and _rate(so["over_halt"]) == (0, 90)
    assert _rate(ev_["swer"]) == (0, 90) and _rate(ev_["over_halt"]) == (0, 90)
    assert ev_["outcome_counts"]["success"] == 30
    assert ev_["outcome_counts"]["wrong_action"] == 40
    assert ev_["outcome_counts"]["safe_halt"] == 20
    rows, _ = untimed_run(run16)
    assert {r["substrate"] for r in rows.values()} == {"web"}  # type: ignore[index]
    assert all(r["failure_class"] is None for r in rows.values())  # type: ignore[index]


def _concurrency_1_gives_the_labels_of_concurrency_16(run16: Path, tmp_path: Path) -> None:
    one = evaluate(ARMS, trials=1, concurrency=1, out=tmp_path / "c1", screenshots="none")
    r1, m1 = untimed_run(one.run_dir)
    r16, _ = untimed_run(run16)
    assert len(r1) == 18
    for ep, row in r1.items():
        assert row == r16[ep], ep
    assert m1["arms"]["browser_screen_only"]["swer"]["numerator"] == 5  # type: ignore[index]
    assert m1["arms"]["browser_effect_verified"]["swer"]["numerator"] == 0  # type: ignore[index]
    assert not (one.run_dir / "blobs").exists()
    assert b'"episode.screenshot"' not in (one.run_dir / "events.jsonl").read_bytes()


def _screenshots_are_stored_once_by_hash_and_logged_in_order(run16: Path) -> None:
    schema = load_event_schema()
    shots: dict[str, list[str]] = {}
    order: dict[str, list[str]] = {}
    for raw in (run16 / "events.jsonl").read_bytes().splitlines():
        line = orjson.loads(raw)
        assert _check(schema, line, schema) == [], raw
        if line["ep"] is not None:
            order.setdefault(line["ep"], []).append(line["type"])
        if line["type"] == ev.ArmScreenshot.TYPE:
            shots.setdefault(line["ep"], []).append(line["data"]["sha256"])
    # two per episode: the filled form before Save, the page after it
    assert len(shots) == 180 and all(len(s) == 2 for s in shots.values())
    stored = {p.stem for p in (run16 / BLOB_DIR).iterdir()}
    assert stored == {h for s in shots.values() for h in s}  # one file per distinct image
    for ep, types in order.items():  # around its submit action, the only action
        acted = types[types.index(ev.ArmScreenshot.TYPE) :][:3]
        assert acted == [ev.ArmScreenshot.TYPE, ev.ArmAction.TYPE, ev.ArmScreenshot.TYPE], ep
    assert verify_run(run16).ok


def _verify_names_a_screenshot_edited_after_the_run(run16: Path, tmp_path: Path) -> None:
    copy = tmp_path / "edited"
    shutil.copytree(run16, copy)
    victim = min((copy / BLOB_DIR).iterdir())
    data = bytearray(victim.read_bytes())
    data[-20] ^= 0xFF
    victim.write_bytes(bytes(data))
    report = verify_run(copy)
    assert not report.ok
    assert any(victim.name in r and "does not match its hash" in r for r in report.reasons)
    victim.unlink()
    report = verify_run(copy)
    assert any(victim.name in r and "is missing" in r for r in report.reasons)


def test_screenshots_final_keeps_only_the_last_one(tmp_path: Path) -> None:
    from effectbench.arms.browser import BrowserScreenOnlyArm, submit_form_in_browser

    class TwoSubmits(BrowserScreenOnlyArm):
        name = "two_submits"

        async def run(self, task, env):  # type: ignore[no-untyped-def]
            await submit_form_in_browser(
                env.browser, env.channels["base_url"], task.solution, env.telemetry
            )
            return await super().run(task, env)

    shot, act = ev.ArmScreenshot.TYPE, ev.ArmAction.TYPE
    expected = {"final": [act, act, shot], "all": [shot, act, shot, shot, act, shot]}
    for policy, telemetry in expected.items():
        run = evaluate(
            [TwoSubmits()], trials=1, task_globs=["mockmed::ok"], out=tmp_path / policy,
            screenshots=policy,
        )  # fmt: skip
        lines = [orjson.loads(x) for x in (run.run_dir / "events.jsonl").read_bytes().splitlines()]
        types = [x["type"] for x in lines if x["ep"] is not None]
        start = types.index(ev.ArmStarted.TYPE) + 1
        assert types[start : start + len(telemetry)] == telemetry, policy
        assert types.count(shot) == telemetry.count(shot), policy
        assert verify_run(run.run_dir).ok
