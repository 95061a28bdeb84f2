"""A run over several substrates shows each arm's cells with the substrates as columns,
in summary.md and report.html; a run over one substrate shows no such table."""

from __future__ import annotations

from pathlib import Path

import attrs

from effectbench.api import evaluate_provider
from effectbench.arms.baselines import ScreenOnlyArm
from effectbench.core.model import Category, Substrate
from effectbench.projections.substrates import SUBSTRATE_COLUMNS, substrate_rows
from effectbench.testing import InMemoryProvider, memory_task


def test_cells_pivot_to_one_column_per_substrate() -> None:
    cells = [("C1", "web", 1), ("C1", "desktop", 2), ("control", "web", 3)]
    assert SUBSTRATE_COLUMNS == ("web", "desktop", "remote_display")
    assert substrate_rows(cells) == [("C1", [1, 2, None]), ("control", [3, None, None])]
    assert substrate_rows([("C1", "web", 1), ("control", "web", 3)]) is None


def test_a_two_substrate_run_has_a_substrate_table_and_a_web_run_has_none(
    tmp_path: Path,
) -> None:
    web = memory_task("ok")
    partial = memory_task("ok-c1", category=Category.C1_PARTIAL_SAVE)
    desktop = attrs.evolve(web, task_id="fake::ok@desktop", substrate=Substrate.DESKTOP)
    both = InMemoryProvider(tasks=[web, desktop, partial])
    run = evaluate_provider([ScreenOnlyArm()], both, trials=2, out=tmp_path / "both").run_dir
    summary = (run / "summary.md").read_text()
    table = summary.split("## SWER by substrate\n", 1)[1].split("\n## ", 1)[0]
    assert "| category | web | desktop | remote_display |" in table
    assert "| control | SWER 0/2, success 2/2 | SWER 0/2, success 2/2 | - |" in table
    assert "| C1_partial_save | SWER 0/2, success 2/2 | - | - |" in table
    report = (run / "report.html").read_text()
    assert '<table class="substrates">' in report and 'data-substrate="desktop"' in report

    only_web = InMemoryProvider(tasks=[web, partial])
    run = evaluate_provider([ScreenOnlyArm()], only_web, trials=1, out=tmp_path / "web").run_dir
    assert "## SWER by substrate" not in (run / "summary.md").read_text()
    assert '<table class="substrates">' not in (run / "report.html").read_text()
