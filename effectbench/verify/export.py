"""The submission writer: one arm of a run as a leaderboard submission (docs/leaderboard.md)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from effectbench.core.events import ReferencePostRead, ReferencePreSnapshot
from effectbench.core.model import (
    SPEC_VERSION,
)
from effectbench.outputs.artifacts import (
    LOG_FILE,
    ArtifactError,
    dump_json,
    record_row,
    scoring_version,
    weakest_execution,
)
from effectbench.outputs.coverage import recorded_threshold, shortfalls
from effectbench.projections.metrics import MetricsAccumulator, MetricsError, PlanIndex
from effectbench.scoring.records import EpisodeRecord

__all__ = ["SEED_RULE", "SUBMISSION_SCHEMA", "PartialExport", "coverage_block", "export_submission"]

SUBMISSION_SCHEMA: Final = "effectbench.submission/1"
SEED_RULE: Final = "trial_tag = sha256('<task_id>:<trial>')[:12], trials 0..trials-1"
"""The one payload rule this verifier reproduces; a submission declaring another is refused."""
_EVIDENCE: Final = (
    "planned",
    "pre_snapshot",
    "post_read",
    ReferencePreSnapshot.TYPE,
    ReferencePostRead.TYPE,
)
"""The logged events a row is built from (the twin's two reads: a reference-mode diff's)."""


def _reference_fields(pre: Mapping[str, Any], post: Mapping[str, Any]) -> dict[str, Any]:
    """The twin's reads of a reference-mode episode, which its expected diff comes from: a
    row without them would rescore as unreadable. Empty for every other episode."""
    if not pre and not post:
        return {}
    return {
        "reference": {
            "program": post.get("arm", pre.get("arm")),
            "pre_snapshot": pre.get("snapshot"),
            "post_snapshot": post.get("snapshot"),
            "reported_success": post.get("reported_success"),
            "message": post.get("message"),
        }
    }


class PartialExport(ArtifactError):
    """The arm measured too little to be submitted as a result (``--allow-partial``
    submits it anyway). ``lines`` says why, one line per reason."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("; ".join(lines))


def coverage_block(claimed: Mapping[str, Any], threshold: float, partial: bool) -> dict[str, Any]:
    """The submission's ``coverage``: the arm's planned and scored episodes, the threshold
    its run recorded, and whether it was exported below it (``--allow-partial``)."""
    return {
        "planned": claimed.get("n_episodes"),
        "eligible": claimed.get("n_eligible"),
        "coverage": claimed.get("coverage"),
        "min_coverage": threshold,
        "partial": partial,
    }


def export_submission(
    run_dir: str | os.PathLike[str],
    system: str,
    out_path: str | os.PathLike[str],
    *,
    allow_partial: bool = False,
) -> Path:
    """Write one arm of a run as a leaderboard submission (docs/leaderboard.md): the raw
    rows (report, oracle readings, payload, effect; a reference-mode episode's twin reads),
    the claimed metrics, the coverage, and the reproducibility block. Labels in it are for
    reading; the verifier re-derives them.

    Raises PartialExport, writing nothing, when the arm scored nothing or its coverage is
    below the threshold its run recorded, unless ``allow_partial``."""
    from effectbench.log.reader import LogError, LoggedEvent, read_log
    from effectbench.projections.episodes import project_episodes

    root = Path(run_dir)
    log_path = root / LOG_FILE
    started: list[Mapping[str, Any]] = []
    resumed: list[Mapping[str, Any]] = []

    def tap(events: Iterator[LoggedEvent]) -> Iterator[LoggedEvent]:
        for ev in events:
            if ev.type == "run.started" and ev.ep is None and not started:
                started.append(ev.data)
            elif ev.type == "run.resumed" and ev.ep is None:
                resumed.append(ev.data)
            yield ev

    try:
        by_id: dict[str, EpisodeRecord] = {}
        for rec in project_episodes(tap(iter(read_log(log_path)))):
            if rec.arm == system:
                by_id[rec.episode_id] = rec  # a later record of an episode replaces it
        if not started:
            raise ArtifactError(f"{log_path} has no run.started event; it is not a run log")
        plan = started[0].get("plan") or {}
        arms = [a if isinstance(a, str) else a.get("name") for a in plan.get("arms", ())]
        if system not in arms:
            raise ArtifactError(
                f"system {system!r} is not an arm of this run (arms: {', '.join(map(str, arms))})"
            )
        need = {
            int(pointer.rsplit("#", 1)[1])
            for rec in by_id.values()
            for key in _EVIDENCE
            if (pointer := rec.evidence.get(key))
        }
        data: dict[int, Mapping[str, Any]] = {}
        for ev in read_log(log_path):
            if ev.seq in need:
                data[ev.seq] = ev.data
    except LogError as exc:
        raise ArtifactError(f"{log_path}: {exc}") from None
    try:
        full = PlanIndex.from_plan(plan)
        index = PlanIndex([system], full.tasks, full.trials)
        records = sorted(by_id.values(), key=lambda r: index.slot(r.arm, r.task_id, r.trial))
    except MetricsError as exc:
        raise ArtifactError(f"{log_path}: {exc}") from None

    def ev_data(rec: EpisodeRecord, key: str) -> Mapping[str, Any]:
        pointer = rec.evidence.get(key)
        return data.get(int(pointer.rsplit("#", 1)[1]), {}) if pointer else {}

    rows = []
    for rec in records:
        base = record_row(rec)
        planned = ev_data(rec, "planned")
        row = {
            "system": system,
            **{
                k: base[k]
                for k in base
                if k
                not in ("arm", "evidence", "verdict_reasons", "observed_count", "expected_count")
            },
            "params": planned.get("params"),
            "effect": planned.get("effect"),
            "effect_hash": planned.get("effect_hash"),
            "pre_snapshot": ev_data(rec, "pre_snapshot").get("snapshot"),
            "post_snapshot": ev_data(rec, "post_read").get("snapshot"),
            **_reference_fields(
                ev_data(rec, ReferencePreSnapshot.TYPE), ev_data(rec, ReferencePostRead.TYPE)
            ),
        }
        rows.append(row)
    claimed = MetricsAccumulator(index).add_all(records).arm_metrics(0)
    threshold = recorded_threshold([*started[:1], *resumed])
    short = shortfalls({"arms": {system: claimed}, "arm_order": [system]}, threshold)
    partial = bool(short)
    if partial and not allow_partial:
        raise PartialExport([s.line() for s in short])
    versions = started[0].get("versions") or {}
    doc = {
        "schema": SUBMISSION_SCHEMA,
        "system": system,
        "pack_fingerprint": plan.get("pack_fingerprint"),
        "tasks": plan.get("tasks"),
        "reproducibility": {
            "package_version": versions.get("package"),
            "spec_version": versions.get("spec", SPEC_VERSION),
            "scoring_version": scoring_version(),
            "events_schema": versions.get("events_schema"),
            "provider": plan.get("provider"),
            "plan_hash": started[0].get("plan_hash"),
            "trials": index.trials,
            "seed_rule": SEED_RULE,
            "execution": weakest_execution(
                (s.get("execution") or {}).get(system) for s in [*started[:1], *resumed]
            ),
            "arm_version": (plan.get("arm_versions") or {}).get(system),
        },
        "coverage": coverage_block(claimed, threshold, partial),
        "rows": rows,
        "claimed": claimed,
    }
    out = Path(out_path)
    try:
        with open(out, "xb") as f:  # a submission is never overwritten
            f.write(dump_json(doc))
    except FileExistsError:
        raise ArtifactError(f"{out} already exists; choose another output file") from None
    return out
