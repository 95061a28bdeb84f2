"""The submission check: a leaderboard submission's labels and metrics re-derived from its raw rows.

Format in docs/leaderboard.md; every claim that the rows do not reproduce is a reason.
What is checked of each row is a rule of ``submission_rules.ROW_RULES``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from effectbench.core.model import SPEC_VERSION, FailureClass, TaskSpec
from effectbench.outputs.artifacts import scoring_version
from effectbench.outputs.coverage import recorded_threshold
from effectbench.projections.metrics import MetricsAccumulator, PlanIndex, TaskAxes
from effectbench.scoring.records import EpisodeRecord, EpisodeTelemetry
from effectbench.verify.compare import Reasons, VerifyReport, compare, load_json
from effectbench.verify.export import SEED_RULE, SUBMISSION_SCHEMA, coverage_block
from effectbench.verify.run_rules import reasons_of
from effectbench.verify.seals import coverage_lines, uncontained_arms
from effectbench.verify.submission_rules import ROW_RULES, RowFacts, row_facts

__all__ = ["verify_submission"]


def _major(version: Any) -> str | None:
    return version.split(".", 1)[0] if isinstance(version, str) and version else None


def _num_or_none(value: Any) -> Any:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _rederive(
    where: str, row: Mapping[str, Any], task: TaskSpec, trial: int, reasons: Reasons, source: str
) -> EpisodeRecord | None:
    """The row's labels from its raw fields, through every rule of ``ROW_RULES``; each
    mismatch with its claims is a reason. None when no label can be derived."""
    facts = row_facts(where, row, task, trial)
    for why in reasons_of(ROW_RULES, facts):
        reasons.add(source, why)
    if facts.expected is None:
        return None
    return _record(facts, facts.expected)


def _record(facts: RowFacts, expected: Mapping[str, Any]) -> EpisodeRecord:
    """The row as the metrics count it, with the re-derived labels."""
    from effectbench.core.model import Outcome, SwerVariant, TrueState

    row, task, trial = facts.row, facts.task, facts.trial
    reported = row.get("reported_success")
    tel = row.get("telemetry") if isinstance(row.get("telemetry"), dict) else {}
    assert isinstance(tel, dict)
    return EpisodeRecord(
        episode_id=str(row.get("episode_id") or f"{row.get('system')}::{task.task_id}::t{trial}"),
        arm=str(row.get("system")),
        task_id=task.task_id,
        trial=trial,
        category=task.category,
        substrate=task.substrate,
        split=task.split.value,
        reversible=task.reversible,
        effect_declared=task.effect_declared,
        correct_action_available=task.correct_action_available,
        reported_success=reported if isinstance(reported, bool) else None,
        halted=None,
        true_state=None if expected["true_state"] is None else TrueState(expected["true_state"]),
        outcome=None if expected["outcome"] is None else Outcome(expected["outcome"]),
        swer_variant=None
        if expected["swer_variant"] is None
        else SwerVariant(expected["swer_variant"]),
        eligible=bool(expected["eligible"]),
        failure_class=None
        if expected["failure_class"] is None
        else FailureClass(expected["failure_class"]),
        verdict_reasons=facts.verdict_reasons,
        telemetry=EpisodeTelemetry(
            **{k: _num_or_none(tel.get(k)) for k in attrs.fields_dict(EpisodeTelemetry)}
        ),
    )


def verify_submission(
    path: str | os.PathLike[str],
    *,
    expected_pack_fingerprint: str | None = None,
    require_isolated: bool = False,
) -> VerifyReport:
    """Every reason a leaderboard submission does not hold up; ok when there is none."""
    from effectbench.core.codec import converter
    from effectbench.run.plan import pack_fingerprint

    p = Path(path)
    reasons = Reasons()
    source = p.name
    doc = load_json(p, reasons)
    if doc is None:
        return VerifyReport.of(reasons.close())
    if not isinstance(doc, dict):
        return VerifyReport.of(
            [f"{source}: a submission is a JSON object (see docs/leaderboard.md)"]
        )
    if doc.get("schema") != SUBMISSION_SCHEMA:
        reasons.add(source, f"schema {doc.get('schema')!r} is not {SUBMISSION_SCHEMA!r}")
    system = doc.get("system")
    if not isinstance(system, str) or not system:
        reasons.add(source, "system must name the submitted system (a non-empty string)")
    rows = doc.get("rows")
    if not isinstance(rows, list):
        reasons.add(source, "rows must be a list of raw episode rows")
        rows = []
    elif not rows:
        reasons.add(
            source, "rows is empty: a submission must carry the raw rows its numbers come from"
        )
    try:
        tasks = [converter.structure(t, TaskSpec) for t in doc.get("tasks") or ()]
    except Exception as exc:  # noqa: BLE001 - untrusted submission content
        reasons.add(source, f"tasks cannot be read as task specs: {exc}")
        return VerifyReport.of(reasons.close())
    if not tasks:
        reasons.add(
            source, "tasks is empty: the pack the rows were scored against must be included"
        )
    fingerprint = pack_fingerprint(tasks)
    if doc.get("pack_fingerprint") != fingerprint:
        reasons.add(
            source,
            f"pack_fingerprint {doc.get('pack_fingerprint')!r} does not match its tasks "
            f"({fingerprint})",
        )
    if expected_pack_fingerprint is not None and fingerprint != expected_pack_fingerprint:
        reasons.add(
            source,
            f"pack fingerprint {fingerprint} is not the expected {expected_pack_fingerprint}",
        )
    repro = doc.get("reproducibility") if isinstance(doc.get("reproducibility"), dict) else None
    if repro is None:
        reasons.add(source, "reproducibility block missing")
        repro = {}
    if repro.get("scoring_version") != scoring_version():
        reasons.add(
            source,
            f"scoring_version {repro.get('scoring_version')!r} is not this verifier's "
            f"{scoring_version()!r}",
        )
    if _major(repro.get("spec_version")) != _major(SPEC_VERSION):
        reasons.add(
            source,
            f"spec_version {repro.get('spec_version')!r} is not comparable with {SPEC_VERSION}",
        )
    if require_isolated and repro.get("execution") != "isolated":
        reasons.add(
            source,
            f"system ran {repro.get('execution') or 'with no recorded execution mode'}, not "
            "isolated (--require-isolated)",
        )
    if repro.get("seed_rule") != SEED_RULE:
        reasons.add(
            source,
            f"seed_rule {repro.get('seed_rule')!r} is not the rule this verifier reproduces "
            f"payloads with ({SEED_RULE!r})",
        )
    trials = repro.get("trials")
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        reasons.add(source, f"reproducibility.trials must be a positive integer, got {trials!r}")
        return VerifyReport.of(reasons.close())
    if not isinstance(system, str) or not rows:
        return VerifyReport.of(reasons.close())
    mine = [(i, r) for i, r in enumerate(rows) if isinstance(r, dict) and r.get("system") == system]
    if not mine:
        named = sorted({str(r.get("system")) for r in rows if isinstance(r, dict)})
        reasons.add(
            source,
            f"system {system!r} matches no rows (rows name: {', '.join(named) or 'nothing'})",
        )
        return VerifyReport.of(reasons.close())
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or r.get("system") != system:
            # nothing in such a row is checked, so the file must not carry it as if it were
            reasons.add(
                source,
                f"row {i} is not a row of system {system!r} (a submission is one system's rows)",
            )
    by_id = {t.task_id: t for t in tasks}
    index = PlanIndex(
        [system],
        [TaskAxes(t.task_id, t.category.value, t.substrate.value, t.split.value) for t in tasks],
        trials,
    )
    acc = MetricsAccumulator(index)
    seen: set[tuple[str, int]] = set()
    for i, row in mine:
        where = f"row {i} ({row.get('episode_id', '?')})"
        task = by_id.get(str(row.get("task_id")))
        trial = row.get("trial")
        if task is None:
            reasons.add(
                source, f"{where}: task {row.get('task_id')!r} is not in the submitted pack"
            )
            continue
        if not isinstance(trial, int) or isinstance(trial, bool) or not 0 <= trial < trials:
            reasons.add(
                source, f"{where}: trial {trial!r} is outside the declared trials 0..{trials - 1}"
            )
            continue
        if (task.task_id, trial) in seen:
            reasons.add(source, f"{where}: ({task.task_id}, trial {trial}) appears twice")
            continue
        seen.add((task.task_id, trial))
        rec = _rederive(where, row, task, trial, reasons, source)
        if rec is not None:
            acc.add(rec)
    missing = [(t.task_id, n) for t in tasks for n in range(trials) if (t.task_id, n) not in seen]
    for task_id, n in missing:
        # dropping the rows an agent did badly on would otherwise only lower coverage
        reasons.add(
            source,
            f"no row for ({task_id}, trial {n}): a submission carries every planned episode "
            "(one that could not be scored as a row with its failure_class)",
        )
    claimed = doc.get("claimed")
    block = acc.arm_metrics(0)
    if not isinstance(claimed, dict):
        reasons.add(source, "claimed metrics missing (an object with the metrics.json arm block)")
    else:
        compare(claimed, block, "claimed", source, reasons)
    return _sealed(VerifyReport.of(reasons.close()), doc, system, block, repro)


def _sealed(
    report: VerifyReport,
    doc: Mapping[str, Any],
    system: str,
    block: Mapping[str, Any],
    repro: Mapping[str, Any],
) -> VerifyReport:
    """The submission's coverage against the threshold it records (its run's), checked
    against the rows, and whether the system ran contained (docs/exit-codes.md)."""
    reasons = list(report.reasons)
    recorded = doc.get("coverage")
    threshold = recorded_threshold([recorded if isinstance(recorded, dict) else None])
    metrics = {"arms": {system: block}, "arm_order": [system]}
    every, short = coverage_lines(metrics, threshold, None)
    if recorded is not None:  # a submission from before the block has none to check
        want = coverage_block(block, threshold, bool(short))
        if not isinstance(recorded, dict):
            reasons.append(f"{doc.get('system')}: coverage is not an object")
        else:
            claimed = {k: recorded.get(k) for k in want}
            check = Reasons()
            compare(claimed, want, "coverage", "submission", check)
            reasons += check.close()
    return attrs.evolve(
        VerifyReport.of(reasons, report.notes),
        coverage=every,
        incomplete=short,
        uncontained=uncontained_arms(
            {system: repro.get("execution")}, [system], {system: repro.get("arm_version")}
        ),
        min_coverage=threshold,
    )
