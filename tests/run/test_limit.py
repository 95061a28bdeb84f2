"""``run --limit N``: the first N tasks of the selection, in pack order, recorded in the
plan so a resume keeps it and refuses another, and verify re-derives the run (issue 30
item 4)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from effectbench.log.reader import read_log
from effectbench.testing import run_cli

PACK_ORDER = ("mockmed::ok", "mockmed::partial", "mockmed::duplicate")


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("limit")
    proc = run_cli("run", "--limit", "2", "--trials", "1", "-q", "--out", "r", cwd=where)
    assert proc.returncode == 0, proc.stderr
    return where / "r"


def _started_plan(run_dir: Path) -> dict[str, object]:
    started = next(e for e in read_log(run_dir / "events.jsonl") if e.type == "run.started")
    return dict(started.data["plan"])


def test_limit_runs_the_first_tasks_in_pack_order(limited: Path) -> None:
    rows = [orjson.loads(line) for line in (limited / "results.jsonl").read_bytes().splitlines()]
    assert sorted({row["task_id"] for row in rows}) == sorted(PACK_ORDER[:2])
    plan = _started_plan(limited)
    assert plan["task_ids"] == list(PACK_ORDER[:2]) and plan["limit"] == 2
    assert orjson.loads((limited / "manifest.json").read_bytes())["limit"] == 2
    verified = run_cli("verify", str(limited))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_limit_cuts_the_selection_of_task_globs(tmp_path: Path) -> None:
    proc = run_cli(
        "run", "--task", "mockmed::d*", "--limit", "1", "--trials", "1", "-q", "--no-report",
        "--out", "r", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _started_plan(tmp_path / "r")["task_ids"] == ["mockmed::duplicate"]


def test_a_resume_keeps_the_recorded_limit_and_refuses_another(limited: Path) -> None:
    before = (limited / "events.jsonl").read_bytes()
    same = run_cli("run", "--resume", str(limited), "--limit", "2", "-q")
    assert same.returncode == 0, same.stderr
    assert "already complete" in same.stdout
    kept = run_cli("run", "--resume", str(limited), "-q")
    assert kept.returncode == 0 and "already complete" in kept.stdout, kept.stderr
    other = run_cli("run", "--resume", str(limited), "--limit", "3", "-q")
    assert other.returncode == 2
    line = other.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "refusing to resume" in line and "--limit 2" in line
    assert (limited / "events.jsonl").read_bytes() == before


@pytest.mark.parametrize("bad", ["0", "-1"])
def test_a_limit_below_one_is_one_line(tmp_path: Path, bad: str) -> None:
    proc = run_cli("run", "--limit", bad, "--out", "r", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--limit" in proc.stderr and "must be a positive integer" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
