"""What summary.md and verify say a run can claim: a per-task table, comparisons on
fewer than 3 trials per task flagged, fixture figures called fixture invariants, and no
p-value for a comparison whose outcomes are deterministic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson

from effectbench.api import evaluate_provider_async
from effectbench.core.arm import TaskView
from effectbench.core.exitcodes import ExitCode
from effectbench.core.model import AgentReport
from effectbench.core.provider import EnvHandle
from effectbench.testing import InMemoryProvider, NoopArm, ScriptedArm, run_cli
from effectbench.verify.run_check import verify_run


class HaltArm(NoopArm):
    name = "halter"


class AlternatingArm:
    """Submits on even trials only: its outcomes vary between trials of one task."""

    name = "alternating"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        if task.trial % 2 or env.driver is None or task.solution is None:
            return AgentReport(reported_success=False, halted=True)
        response = await env.driver.submit(task.solution)
        return AgentReport(reported_success=response.screen_says_saved)


class FixtureProvider(InMemoryProvider):
    """The in-memory provider, declaring itself a deterministic fixture."""

    fixture = True


def _run(tmp_path: Path, provider: Any, arms: list[Any], trials: int, name: str = "run") -> Path:
    async def go() -> Path:
        result = await evaluate_provider_async(
            arms, provider, trials=trials, out=tmp_path / name, report=False
        )
        return Path(result.run_dir)

    return anyio.run(go)


def _metrics(run_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((run_dir / "metrics.json").read_bytes())
    return doc


def _section(summary: str, title: str) -> str:
    return summary.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_summary_has_a_row_per_task_even_within_one_category(tmp_path: Path) -> None:
    # both fake tasks are controls: the cells table merges them, the per-task one does not
    run_dir = _run(tmp_path, InMemoryProvider(("ok", "phantom")), [ScriptedArm()], 2)
    per_task = _metrics(run_dir)["arms"]["scripted"]["per_task"]
    assert [t["task_id"] for t in per_task] == ["fake::ok", "fake::phantom"]
    assert [(t["swer"]["numerator"], t["task_success"]["numerator"]) for t in per_task] == [
        (0, 2),
        (2, 0),
    ]
    assert all(t["identical"] for t in per_task)
    table = _section((run_dir / "summary.md").read_text(), "Per task")
    assert "| fake::ok | control | 2/2 | 0/2 | 0/2 | 2/2 | 2/2 | same every trial |" in table
    assert "| fake::phantom | control | 2/2 | 2/2 | 0/2 | 0/2 | 2/2 | same every trial |" in table
    cells = _section((run_dir / "summary.md").read_text(), "Cells (category x substrate)")
    assert cells.count("| control |") == 1


def test_a_comparison_on_fewer_than_3_trials_per_task_is_flagged(tmp_path: Path) -> None:
    thin = _run(tmp_path, InMemoryProvider(("ok",)), [AlternatingArm(), HaltArm()], 2, "thin")
    (c,) = _metrics(thin)["comparisons"]
    assert (c["min_pairs_per_task"], c["comparative_claim"]) == (2, False)
    summary = (thin / "summary.md").read_text()
    assert "**alternating - halter is not a comparative claim:** 2 paired trial(s)" in summary
    report = verify_run(thin)
    assert report.ok  # thin is not unsound ...
    assert len(report.notes) == 1 and "fewer than the 3 per task" in report.notes[0]
    proc = run_cli("verify", str(thin), timeout=60)
    # sound; its arms are this module's, in-process and not the harness's: not contained
    assert proc.returncode == ExitCode.NOT_CONTAINED, proc.stdout
    assert "note: comparison alternating - halter is not" in proc.stdout
    # ... and three trials per task make it a claim: no flag, no note
    enough = _run(tmp_path, InMemoryProvider(("ok",)), [AlternatingArm(), HaltArm()], 3, "enough")
    (c,) = _metrics(enough)["comparisons"]
    assert (c["min_pairs_per_task"], c["comparative_claim"]) == (3, True)
    assert "not a comparative claim" not in (enough / "summary.md").read_text()
    assert verify_run(enough).notes == []


def test_deterministic_outcomes_get_no_p_value_and_a_fixture_says_so(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, FixtureProvider(("ok", "phantom")), [ScriptedArm(), HaltArm()], 3)
    (c,) = _metrics(run_dir)["comparisons"]
    assert c["deterministic"] is True and c["comparative_claim"] is True
    summary = (run_dir / "summary.md").read_text()
    assert "**These figures are fixture invariants, not findings.** Provider fake" in summary
    comparison = _section(summary, "Comparisons (paired by task and trial; first - second)")
    assert comparison.count("none: deterministic outcomes") == 3
    p = c["swer"]["mcnemar"]["exact_p"]
    assert f"| {p:.4g} /" not in comparison
    assert orjson.loads((run_dir / "manifest.json").read_bytes())["fixture"] is True
    assert verify_run(run_dir).ok


def test_outcomes_that_vary_keep_their_p_values_and_no_fixture_banner(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, InMemoryProvider(("ok",)), [AlternatingArm(), HaltArm()], 4)
    (c,) = _metrics(run_dir)["comparisons"]
    assert c["deterministic"] is False
    summary = (run_dir / "summary.md").read_text()
    assert "fixture invariants" not in summary and "deterministic outcomes" not in summary
    p = c["task_success"]["mcnemar"]["exact_p"]
    assert f"| {p:.4g} / " in _section(
        summary, "Comparisons (paired by task and trial; first - second)"
    )
    assert orjson.loads((run_dir / "manifest.json").read_bytes())["fixture"] is False


def test_mockmed_declares_itself_a_fixture() -> None:
    from effectbench_mockmed import MockMedProvider
    from effectbench_mockmed.packs_full import MockMedFullProvider

    assert MockMedProvider.fixture is True and MockMedFullProvider.fixture is True
