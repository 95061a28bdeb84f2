"""Reading a finished run's files in tests: results by arm and MockMed mode, raw events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson


def results_by_mode(run_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """results.jsonl by arm, then by MockMed mode."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for line in (run_dir / "results.jsonl").read_bytes().splitlines():
        row = orjson.loads(line)
        out.setdefault(row["arm"], {})[row["task_id"].removeprefix("mockmed::")] = row
    return out


def log_events(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of events.jsonl, parsed."""
    return [orjson.loads(line) for line in (run_dir / "events.jsonl").read_bytes().splitlines()]


def labels(run_dir: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """``(task_id, arm) -> (true_state, outcome)`` of every episode in results.jsonl."""
    rows = [orjson.loads(x) for x in (run_dir / "results.jsonl").read_bytes().splitlines()]
    return {(r["task_id"], r["arm"]): (r["true_state"], r["outcome"]) for r in rows}
