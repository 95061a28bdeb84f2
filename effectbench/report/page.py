"""One run's report: artifacts -> model -> drill-downs from the log -> report.html."""

from __future__ import annotations

import os
from collections.abc import Container, Iterable
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import attrs
import orjson

from effectbench.core import rundir
from effectbench.report.data import RESULTS, ReportError, load_run
from effectbench.report.drill import (
    DRILL_LIMIT,
    EpisodeDrill,
    ShotBudget,
    collect_events,
    drill,
    select_episodes,
)
from effectbench.report.headline import fixture_of, verdicts
from effectbench.report.lists import Drilled, EpisodeLists, ListEntry, build_lists
from effectbench.report.output import write_page
from effectbench.report.render import render

__all__ = ["REPORT_FILE", "build_report", "drills_of"]

REPORT_FILE: Final = rundir.REPORT_FILE


def drills_of(
    data: Any, limit: int, wanted: Iterable[str], *, run: str | None = None
) -> tuple[list[EpisodeDrill], str, EpisodeLists]:
    """The drill-downs, the sentence on how they were chosen, and the count lists over
    them. ``run`` (compare.html's label of the run) prefixes anchors and arm names."""
    picked, note = select_episodes(data.episodes, limit, wanted)
    by_slot = {e.slot: e for e in picked}
    rows = _rows_at(data.run_dir / RESULTS, by_slot)
    events = collect_events(
        data.run_dir,
        (e.episode_id for e in picked),
        data.identity.final_hash,
        data.identity.events,
    )
    budget = ShotBudget()
    drills = [
        drill(e, rows.get(e.slot, {}), events.get(e.episode_id, []), data.run_dir, budget)
        for e in picked
    ]
    if run is not None:
        prefix = quote(run, safe="")
        drills = [
            attrs.evolve(d, anchor=f"{prefix}/{d.anchor}", arm=f"{run}:{d.arm}") for d in drills
        ]
    lists = build_lists(
        Drilled(
            d.arm,
            ListEntry(d.anchor, d.episode_id, d.task_id, d.trial, d.label),
            str(rows.get(e.slot, {}).get("category")),
            str(rows.get(e.slot, {}).get("substrate")),
        )
        for d, e in zip(drills, picked, strict=True)
    )
    return drills, note, lists


def _rows_at(path: Path, slots: Container[int]) -> dict[int, dict[str, Any]]:
    """The results rows at ``slots`` (file order); the others are not parsed."""
    rows: dict[int, dict[str, Any]] = {}
    try:
        with open(path, "rb") as f:
            slot = 0
            for line in f:
                if not line.strip():
                    continue
                if slot in slots:
                    rows[slot] = orjson.loads(line)
                slot += 1
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ReportError(
            f"cannot read {path} ({exc}); rebuild it with `effectbench rescore`"
        ) from None
    return rows


def build_report(
    run_dir: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    drill_limit: int = DRILL_LIMIT,
    episodes: Iterable[str] = (),
) -> Path:
    """Write the run's report (default ``<run_dir>/report.html``) and return its path.

    Built only from manifest.json, metrics.json, results.jsonl and events.jsonl."""
    root = Path(run_dir)
    wanted = list(dict.fromkeys(episodes))
    data = load_run(root, drill_limit=drill_limit, wanted=wanted, codes=False)
    drills, note, lists = drills_of(data, drill_limit, wanted)
    html = render(
        "run.html.j2",
        run=data,
        drills=drills,
        drill_note=note,
        lists=lists,
        complete=len(data.episodes) <= drill_limit,
        verdicts=verdicts(data.comparisons),
        fixture=fixture_of(data.identity.fixture, data.identity.provider_name),
    )
    target = Path(out) if out is not None else root / REPORT_FILE
    return write_page(target, html)
