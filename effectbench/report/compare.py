"""Runs of one pack side by side in one report, paired per task and trial.

Pairing needs the same episodes on both sides: the same pack (fingerprint), the same
tasks in the same order and the same number of trials. Runs that differ there are
refused with one line; arms and versions may differ (that is what is compared).
Each later run is paired with the first, arm by arm where the arm names match (every
arm against every arm when none does), through the same paired comparison the
metrics use (effectbench.projections.compare: Newcombe interval, McNemar, a
task-clustered interval).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from effectbench.projections.compare import Pair, compare_arms
from effectbench.report.data import MANIFEST, TASK_LIMIT, ReportError, RunData, load_run, read_json
from effectbench.report.drill import DRILL_LIMIT, EpisodeDrill
from effectbench.report.headline import fixture_of, verdicts
from effectbench.report.lists import EpisodeLists
from effectbench.report.output import write_page
from effectbench.report.page import drills_of
from effectbench.report.render import render

__all__ = ["build_compare", "check_comparable", "paired_blocks", "run_labels"]


def _plan_facts(manifest: Mapping[str, Any]) -> tuple[Any, list[str], Any, Any]:
    tasks = [str(t.get("task_id")) for t in manifest.get("tasks") or () if isinstance(t, Mapping)]
    provider = (manifest.get("provider") or {}).get("name")
    return manifest.get("pack_fingerprint"), tasks, manifest.get("trials"), provider


def check_comparable(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """The runs' manifests, or a ReportError saying in one line why they cannot be paired."""
    if len(dirs) < 2:
        raise ReportError("compare needs at least two run directories")
    manifests = [read_json(d / MANIFEST) for d in dirs]
    first = _plan_facts(manifests[0])
    for d, m in zip(dirs[1:], manifests[1:], strict=True):
        pack, tasks, trials, provider = _plan_facts(m)
        why = None
        if provider != first[3]:
            why = f"provider {first[3]!r} vs {provider!r}"
        elif pack != first[0]:
            why = f"pack fingerprint {str(first[0])[:12]} vs {str(pack)[:12]} (different packs)"
        elif tasks != first[1]:
            why = f"the task lists differ ({len(first[1])} vs {len(tasks)} tasks)"
        elif trials != first[2]:
            why = f"trials per task differ ({first[2]} vs {trials})"
        if why is not None:
            raise ReportError(
                f"cannot pair {dirs[0]} with {d}: {why}; compare runs of the same pack, "
                "tasks and trials"
            )
    return manifests


def run_labels(dirs: Sequence[Path]) -> list[str]:
    """Directory names when they tell the runs apart, else R1, R2, ..."""
    names = [d.resolve().name or str(d) for d in dirs]
    return names if len(set(names)) == len(names) else [f"R{i + 1}" for i in range(len(dirs))]


def _eligible(label: str | None) -> bool:
    return label is not None and not label.startswith("failed")


def _pairs(
    a: RunData, arm_a: str, b: RunData, arm_b: str, tasks: Sequence[str], trials: int
) -> tuple[list[list[Pair]], list[list[Pair]], list[list[Pair]]]:
    swer: list[list[Pair]] = []
    halt: list[list[Pair]] = []
    succ: list[list[Pair]] = []
    for task in tasks:
        s: list[Pair] = []
        h: list[Pair] = []
        u: list[Pair] = []
        for trial in range(trials):
            x, y = b.codes.get((arm_b, task, trial)), a.codes.get((arm_a, task, trial))
            if not (_eligible(x) and _eligible(y)):
                continue
            assert x is not None and y is not None
            s.append((x.startswith("SWER"), y.startswith("SWER")))
            h.append((x == "over-halt", y == "over-halt"))
            u.append((x == "success", y == "success"))
        swer.append(s)
        halt.append(h)
        succ.append(u)
    return swer, succ, halt


def paired_blocks(
    runs: Sequence[RunData], labels: Sequence[str], tasks: Sequence[str]
) -> list[dict[str, Any]]:
    """Each later run minus the first, per matching arm, paired by (task, trial)."""
    base = runs[0]
    trials = base.identity.trials
    z = base.identity.z
    out = []
    for run, label in zip(runs[1:], labels[1:], strict=True):
        names_a = [a.name for a in base.arms]
        names_b = [a.name for a in run.arms]
        common = [n for n in names_b if n in names_a]
        combos = [(n, n) for n in common] or [(x, y) for y in names_b for x in names_a]
        for arm_a, arm_b in combos:
            swer, succ, halt = _pairs(base, arm_a, run, arm_b, tasks, trials)
            kwargs: dict[str, Any] = {} if z is None else {"z": float(z)}
            out.append(
                compare_arms(
                    f"{label}:{arm_b}",
                    f"{labels[0]}:{arm_a}",
                    swer,
                    succ,
                    len(tasks) * trials,
                    over_halt=halt,
                    **kwargs,
                )
            )
    return out


def build_compare(dirs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]) -> Path:
    """Write one report of ``dirs`` side by side (refused when they cannot be paired)."""
    paths = [Path(d) for d in dirs]
    for p in paths:
        if not p.is_dir():
            raise ReportError(f"run directory {p} does not exist")
    manifests = check_comparable(paths)
    runs = [load_run(p) for p in paths]
    labels = run_labels(paths)
    tasks = [str(t.get("task_id")) for t in manifests[0].get("tasks") or ()]
    arms = [
        attrs.evolve(a, name=f"{label}:{a.name}")
        for run, label in zip(runs, labels, strict=True)
        for a in run.arms
    ]
    task_rows = _task_rows(runs, tasks[:TASK_LIMIT])
    drills, lists = _drills(runs, labels)  # checks each log as a report does
    comparisons = paired_blocks(runs, labels, tasks)
    html = render(
        "compare.html.j2",
        runs=list(zip(labels, paths, runs, strict=True)),
        arms=arms,
        comparisons=comparisons,
        task_rows=task_rows,
        tasks_total=len(tasks),
        k=runs[0].identity.k,
        drills=drills,
        lists=lists,
        complete=all(len(r.episodes) <= DRILL_LIMIT for r in runs),
        verdicts=verdicts(comparisons),
        fixture=fixture_of(runs[0].identity.fixture, runs[0].identity.provider_name),
    )
    return write_page(Path(out), html)


def _drills(
    runs: Sequence[RunData], labels: Sequence[str]
) -> tuple[list[tuple[str, list[EpisodeDrill], str]], EpisodeLists]:
    """Each run's drill-downs (label, drills, how chosen) and the count lists over all."""
    out = []
    lists = EpisodeLists({})
    for run, label in zip(runs, labels, strict=True):
        drills, note, run_lists = drills_of(run, DRILL_LIMIT, (), run=label)
        out.append((label, drills, note))
        lists = lists.merged(run_lists)
    return out, lists


def _task_rows(
    runs: Sequence[RunData], tasks: Sequence[str]
) -> list[tuple[str, list[tuple[int, int, int]]]]:
    """Per task, per (run, arm): (successes, SWER, eligible) of its trials."""
    rows = []
    for task in tasks:
        cells = []
        for run in runs:
            for arm in run.arms:
                labels = [run.codes.get((arm.name, task, t)) for t in range(run.identity.trials)]
                eligible = [x for x in labels if _eligible(x)]
                succ = sum(1 for x in eligible if x == "success")
                swer = sum(1 for x in eligible if x is not None and x.startswith("SWER"))
                cells.append((succ, swer, len(eligible)))
        rows.append((task, cells))
    return rows
