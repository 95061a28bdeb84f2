"""The runs under a folder, and each one's row of the index, from its own artifacts.

Every figure comes from the run's manifest.json and metrics.json as written: the viewer
computes none and never reads a log for a number, so the index and the run's report
cannot disagree. A run whose artifacts are missing or unreadable is still a row, one
that says what is wrong and the command that fixes it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs

from effectbench.core.rundir import LOG_FILE, MANIFEST_FILE, RunDir
from effectbench.report.data import Rate, ReportError, read_json

__all__ = ["MAX_DEPTH", "ArmFigures", "RunRow", "find_runs", "read_row", "run_rows"]

MAX_DEPTH: Final = 4
"""How many folders below the viewed one a run may sit (runs/a, runs/sweep/b, ...)."""
_RUN_ID_TIME: Final = re.compile(r"^(\d{8}T\d{6}Z)-")


@attrs.frozen
class ArmFigures:
    """One arm's headline, exactly as metrics.json states it."""

    name: str
    swer: Rate
    over_halt: Rate
    task_success: Rate
    coverage: float | None
    planned: int | None = None
    eligible: int | None = None


@attrs.frozen
class RunRow:
    """One run in the index. ``problem`` is set (and the figures may be empty) when its
    artifacts cannot be read; it says how to fix that."""

    name: str
    provider: str = ""
    pack: str = ""
    run_id: str = ""
    date: str = ""
    planned: int | None = None
    recorded: int | None = None
    arms: tuple[ArmFigures, ...] = ()
    has_report: bool = False
    problem: str | None = None


def find_runs(root: Path) -> Iterator[Path]:
    """Every run directory under ``root`` (one holding events.jsonl or manifest.json), in
    name order; a run's own folders (its blob store) are not searched."""
    yield from _walk(root, 0)


def _walk(folder: Path, depth: int) -> Iterator[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        if (path / LOG_FILE).is_file() or (path / MANIFEST_FILE).is_file():
            yield path
        elif depth + 1 < MAX_DEPTH:
            yield from _walk(path, depth + 1)


def run_rows(root: Path) -> list[RunRow]:
    return [read_row(root, run) for run in find_runs(root)]


def read_row(root: Path, run: Path) -> RunRow:
    """``run``'s row, or a row whose ``problem`` says what is wrong and what to do."""
    name = run.relative_to(root).as_posix()
    files = RunDir(run)
    if not files.log.is_file():
        return RunRow(name, problem=f"{run} holds no {LOG_FILE}; it is not a whole run directory")
    try:
        manifest = read_json(files.manifest)
        metrics = read_json(files.metrics)
        return _row(name, manifest, metrics, files.report.is_file())
    except ReportError as exc:
        return RunRow(name, problem=str(exc))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return RunRow(
            name,
            problem=f"{files.metrics} lacks a figure the index shows ({exc!r}); rebuild it "
            f"with `effectbench rescore {run}`",
        )


def _row(
    name: str, manifest: Mapping[str, Any], metrics: Mapping[str, Any], report: bool
) -> RunRow:
    episodes = manifest.get("episodes") or {}
    run_id = str(manifest.get("run_id") or "")
    return RunRow(
        name=name,
        provider=str((manifest.get("provider") or {}).get("name") or ""),
        pack=str(manifest.get("pack_fingerprint") or ""),
        run_id=run_id,
        date=_date(run_id),
        planned=_count(episodes.get("planned")),
        recorded=_count(episodes.get("recorded")),
        arms=tuple(_arm(str(a), metrics["arms"][a]) for a in metrics["arm_order"]),
        has_report=report,
    )


def _arm(name: str, block: Mapping[str, Any]) -> ArmFigures:
    coverage = block.get("coverage")
    return ArmFigures(
        name=name,
        swer=Rate.of(block["swer"]),
        over_halt=Rate.of(block["over_halt"]),
        task_success=Rate.of(block["task_success"]),
        coverage=None if coverage is None else float(coverage),
        planned=_count(block.get("n_episodes")),
        eligible=_count(block.get("n_eligible")),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _date(run_id: str) -> str:
    """The run's start as the run id spells it (UTC), or "" for a run id given by hand."""
    match = _RUN_ID_TIME.match(run_id)
    if match is None:
        return ""
    try:
        when = datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return ""
    return when.strftime("%Y-%m-%d %H:%M UTC")
