"""The run check: trusts no stored label, recomputes everything, lists every disagreement.

``verify_run`` re-checks a run directory: the log's hash chain (and its final hash and
count against the manifest), the plan hash and pack fingerprint, that every planned
episode's payload and effect come from the plan, then rebuilds every artifact from
the log through the same code path ``rescore`` uses (labels re-derived by judge and
classify from the raw report and the oracle's pre/post readings) and compares,
row by row and metric by metric, with what is on disk. Each check of the log walk is a
rule of ``run_rules.py`` (its tables: docs/leaderboard.md).

The submission format and its check live in ``export`` and ``submission``; their names
are re-exported here because this module was once the verifier's only home.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from effectbench.audit.attest import attestations
from effectbench.core.hashing import content_hash
from effectbench.core.model import TaskSpec, trial_params
from effectbench.log.reader import LoggedEvent
from effectbench.outputs.artifacts import (
    LOG_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    ArtifactError,
    build_artifacts,
    recompute_metrics_from_results,
)
from effectbench.outputs.coverage import recorded_threshold
from effectbench.projections.metrics import MetricsError
from effectbench.verify.claims import claim_notes
from effectbench.verify.compare import (
    FLOAT_TOLERANCE,
    Reasons,
    VerifyReport,
    compare,
    first_difference,
    load_json,
)
from effectbench.verify.export import SEED_RULE, SUBMISSION_SCHEMA, export_submission
from effectbench.verify.results_check import compare_results
from effectbench.verify.run_rules import (
    EPISODE_RULES,
    IMAGE_RULES,
    PLAN_RULES,
    SEEN_KEY,
    ImageFacts,
    PlanFacts,
    PlannedFacts,
    reasons_of,
)
from effectbench.verify.scratch import Scratch
from effectbench.verify.seals import coverage_lines, uncontained_arms
from effectbench.verify.submission import verify_submission

__all__ = [
    "FLOAT_TOLERANCE",
    "SEED_RULE",
    "SEEN_KEY",
    "SUBMISSION_SCHEMA",
    "VerifyReport",
    "export_submission",
    "verify_run",
    "verify_submission",
]

_MANIFEST_SAME: Final = (
    "schema",
    "run_id",
    "versions",
    "recorded_versions",
    "provider",
    "pack_fingerprint",
    "fixture",
    "plan_hash",
    "tasks",
    "task_globs",
    "limit",
    "arms",
    "trials",
    "k",
    "concurrency",
    "resumes",
    "z",
    "episodes",
    "run_finished",
    "log",
    "artifacts",
    "attestations",
    "execution",
    "containment",
)
"""Manifest keys that must equal the rebuilt ones (python, platform and dependency versions
describe the machine that built it and may legitimately differ on another)."""


_CACHE_MAX: Final = 4096
"""Entries kept by each of the plan check's memo tables before it starts over."""


def _plan_checks(
    run_dir: Path,
    verify_chain: bool,
    reasons: Reasons,
    scratch: Scratch,
    known_bad_line: int | None = None,
) -> Mapping[str, Any]:
    """The log walk of the run check: the plan in ``run.started`` through ``PLAN_RULES``,
    then every ``episode.planned`` through ``EPISODE_RULES`` and every screenshot and
    action through ``IMAGE_RULES`` (``run_rules.py``); returns the plan's ``arm_versions``
    (what code each arm is), empty without a plan.

    ``known_bad_line``: a line the chain check already reported; stopping there is no news."""
    from effectbench.log.reader import LogCorrupt, LogError, read_log

    arm_versions: dict[str, Any] = {}
    try:
        events = iter(read_log(run_dir / LOG_FILE, verify=verify_chain))
        started = next((ev for ev in events if ev.type == "run.started" and ev.ep is None), None)
        if started is None:
            reasons.add(LOG_FILE, "no run.started event: the log does not carry its plan")
            return arm_versions
        facts = _plan_facts(started.seq, started.data)
        if isinstance(facts.plan.get("arm_versions"), dict):
            arm_versions = dict(facts.plan["arm_versions"])
        for why in reasons_of(PLAN_RULES, facts):
            reasons.add(LOG_FILE, why)
        if facts.tasks is not None:
            tasks = {t.task_id: t for t in facts.tasks}
            _walk_episodes(run_dir, events, tasks, reasons, scratch)
    except LogError as exc:
        if not (isinstance(exc, LogCorrupt) and exc.line_no == known_bad_line):
            reasons.add(LOG_FILE, f"cannot be read past {exc}")
    return arm_versions


def _plan_facts(seq: int, data: Mapping[str, Any]) -> PlanFacts:
    """The plan ``run.started`` carries, with its tasks rebuilt where they can be."""
    from effectbench.core.codec import converter

    plan = data.get("plan") or {}
    try:
        specs = tuple(converter.structure(t, TaskSpec) for t in plan.get("tasks", ()))
    except Exception as exc:  # noqa: BLE001 - untrusted log content
        return PlanFacts(seq, plan, data.get("plan_hash"), None, str(exc))
    return PlanFacts(seq, plan, data.get("plan_hash"), specs)


def _walk_episodes(
    run_dir: Path,
    events: Iterator[LoggedEvent],
    tasks: Mapping[str, TaskSpec],
    reasons: Reasons,
    scratch: Scratch,
) -> None:
    """Every event after the plan: episodes that ended are remembered (``scratch``), the
    rest go through the table of their kind."""
    from effectbench.core.events import TERMINAL_TYPES, ArmAction, ArmScreenshot
    from effectbench.core.evidence import check_blob

    plans = _PlanMemo(tasks)
    blobs: dict[tuple[str, str], str | None] = {}
    for ev in events:
        found: list[str] = []
        if ev.type in TERMINAL_TYPES and ev.ep is not None:
            scratch.add("terminated", ev.ep)
        elif ev.type == ArmScreenshot.TYPE:  # one image is hashed once, however often cited
            cited = (str(ev.data.get("sha256")), str(ev.data.get("path")))
            if cited not in blobs:
                if len(blobs) >= _CACHE_MAX:  # bounded: memory flat in the run's length
                    blobs.clear()
                blobs[cited] = check_blob(run_dir, ev.data)
            found = reasons_of(
                IMAGE_RULES, ImageFacts(ev.type, ev.seq, ev.ep, ev.data, blobs[cited])
            )
            scratch.add("shot", f"{ev.ep}\0{cited[0]}")
        elif ev.type == ArmAction.TYPE:
            shown = functools.partial(_shown, scratch, ev.ep)
            found = reasons_of(
                IMAGE_RULES, ImageFacts(ev.type, ev.seq, ev.ep, ev.data, shown=shown)
            )
        elif ev.type == "episode.planned":
            terminated = ev.ep is not None and scratch.has("terminated", ev.ep)
            found = reasons_of(EPISODE_RULES, plans.facts(ev, terminated))
        for why in found:
            reasons.add(LOG_FILE, why)


def _shown(scratch: Scratch, ep: str | None, sha: str) -> bool:
    """Whether episode ``ep`` logged a screenshot of ``sha`` so far."""
    return scratch.has("shot", f"{ep}\0{sha}")


@attrs.define
class _PlanMemo:
    """What the plan gives each (task, trial): its payload and its effect's hash, computed
    once per pair and kept for at most ``_CACHE_MAX`` pairs."""

    tasks: Mapping[str, TaskSpec]
    _expected: dict[tuple[str, int], tuple[dict[str, str], str]] = attrs.field(factory=dict)

    def facts(self, ev: LoggedEvent, terminated: bool) -> PlannedFacts:
        task = self.tasks.get(str(ev.data.get("task_id")))
        trial = ev.data.get("trial")
        if task is None or not isinstance(trial, int):
            return PlannedFacts(ev.seq, ev.ep, ev.data, task, terminated)
        key = (task.task_id, trial)
        if key not in self._expected:
            if len(self._expected) >= _CACHE_MAX:
                self._expected.clear()
            params = trial_params(task, trial)
            self._expected[key] = (params, content_hash(task.expected_effect.resolve(params)))
        params, effect_hash = self._expected[key]
        return PlannedFacts(ev.seq, ev.ep, ev.data, task, terminated, params, effect_hash)


def _explain_unbuilt(rebuilt_manifest: Mapping[str, Any], reasons: Reasons, hint: str) -> None:
    """An interrupted run never built its artifacts: one reason that says so and how to go
    on, instead of one "missing" per file."""
    finished = rebuilt_manifest.get("run_finished")
    if isinstance(finished, Mapping) and finished.get("interrupted") is False:
        return
    unbuilt = [
        name
        for name in (MANIFEST_FILE, METRICS_FILE, RESULTS_FILE, SUMMARY_FILE)
        if reasons.remove(name, "missing")
    ]
    if unbuilt:
        reasons.add(
            LOG_FILE,
            f"the run was interrupted before it completed, so {', '.join(unbuilt)} "
            f"{'was' if len(unbuilt) == 1 else 'were'} never built{hint}",
        )


def _not_isolated(execution: Any, arms: Sequence[Any]) -> list[str]:
    """One reason per arm that did not run isolated (``--require-isolated``)."""
    modes = execution if isinstance(execution, dict) else {}
    return [
        f"arm {arm!r} ran {modes.get(arm) or 'with no recorded execution mode'}, not isolated "
        "(--require-isolated)"
        for arm in arms
        if modes.get(arm) != "isolated"
    ]


def verify_run(
    run_dir: str | os.PathLike[str],
    *,
    expected_pack_fingerprint: str | None = None,
    require_isolated: bool = False,
) -> VerifyReport:
    """Every reason the run directory is not what its log says; ok when there is none.

    With ``expected_pack_fingerprint`` (the published one, ``effectbench pack``), the pack
    the log's plan recomputes to must also be that one: a log can be re-chained by anyone,
    a published fingerprint cannot."""
    from effectbench.log.reader import verify_log

    root = Path(run_dir)
    reasons = Reasons()
    if not (root / LOG_FILE).is_file():
        return VerifyReport.of([f"{root}: no {LOG_FILE}; give a run directory"])
    from effectbench.run.runlock import run_lock_held

    if run_lock_held(root / LOG_FILE):  # not interrupted: running, so a resume would be refused
        live = f"{root}: the run is live (an effectbench process is running it now); "
        return VerifyReport.of([live + "verify it once that process has finished"])
    manifest = load_json(root / MANIFEST_FILE, reasons)
    metrics = load_json(root / METRICS_FILE, reasons)
    if manifest is not None and not isinstance(manifest, dict):
        # without it the final hash and count go unchecked: never skip that silently
        reasons.add(MANIFEST_FILE, f"is not a JSON object (got {type(manifest).__name__})")
    log_facts = manifest.get("log") if isinstance(manifest, dict) else None
    if isinstance(manifest, dict) and not isinstance(log_facts, dict):
        reasons.add(
            MANIFEST_FILE,
            "holds no record of how the run ended (log: final hash and event count), so a cut "
            "or re-chained log cannot be ruled out",
        )
    log_facts = log_facts if isinstance(log_facts, dict) else {}
    chain = verify_log(
        root / LOG_FILE,
        expected_final_hash=log_facts.get("final_hash"),
        expected_count=log_facts.get("events"),
    )
    resume = f"continue it with `effectbench run --resume {root}`"
    bad = None
    if not chain.ok:
        where = f"line {chain.first_bad_line}: " if chain.first_bad_line is not None else ""
        bad = f"{where}{chain.reason}"
        reasons.add(LOG_FILE, f"hash chain check failed: {bad}")
    if chain.torn_tail:
        reasons.add(
            LOG_FILE, f"ends in a torn (incomplete) line: the run was killed mid-write; {resume}"
        )
    with tempfile.TemporaryDirectory(prefix="effectbench-verify-") as tmp:
        scratch = Scratch(Path(tmp))
        try:
            found = _Found(root, manifest, metrics, chain, bad, resume)
            return _check(
                found, Path(tmp), scratch, reasons, expected_pack_fingerprint, require_isolated
            )
        finally:
            scratch.close()


@attrs.frozen
class _Found:
    """What verify read before it rebuilt anything: the run's own files, its chain check
    (``bad``: the chain's first fault), and how to continue it."""

    root: Path
    manifest: Any
    metrics: Any
    chain: Any
    bad: str | None
    resume: str


def _check(
    found: _Found,
    tmp: Path,
    scratch: Scratch,
    reasons: Reasons,
    expected_pack_fingerprint: str | None,
    require_isolated: bool,
) -> VerifyReport:
    """verify_run's checks past the hash chain, with scratch space in ``tmp``."""
    root, manifest, metrics, chain, bad = (
        found.root,
        found.manifest,
        found.metrics,
        found.chain,
        found.bad,
    )
    arm_versions = _plan_checks(root, False, reasons, scratch, known_bad_line=chain.first_bad_line)
    rebuilt_dir = tmp / "rebuilt"
    rebuilt_dir.mkdir()
    try:
        build_artifacts(root, out_dir=rebuilt_dir, verify_chain=False, attest=attestations)
    except ArtifactError as exc:
        if bad is None or bad not in str(exc):  # else the chain line above says it all
            reasons.add(LOG_FILE, f"labels and metrics cannot be re-derived: {exc}")
        return VerifyReport.of(reasons.close())
    compare_results(root / RESULTS_FILE, rebuilt_dir / RESULTS_FILE, scratch, reasons)
    rebuilt_metrics = orjson.loads((rebuilt_dir / METRICS_FILE).read_bytes())
    rebuilt_manifest = orjson.loads((rebuilt_dir / MANIFEST_FILE).read_bytes())
    ran = rebuilt_manifest.get("pack_fingerprint")
    if expected_pack_fingerprint is not None and ran != expected_pack_fingerprint:
        reasons.add(
            LOG_FILE, f"pack fingerprint {ran} is not the expected {expected_pack_fingerprint}"
        )
    if require_isolated:
        arms = rebuilt_manifest.get("arms") or []
        for why in _not_isolated(rebuilt_manifest.get("execution"), arms):
            reasons.add(LOG_FILE, why)
    if metrics is not None:
        compare(metrics, rebuilt_metrics, "", METRICS_FILE, reasons)
    if isinstance(manifest, dict):
        rescored_under = rebuilt_manifest.get("versions", {}).get("scoring")
        if manifest.get("versions", {}).get("scoring") != rescored_under:
            reasons.add(
                MANIFEST_FILE,
                "scored under scoring version "
                f"{manifest.get('versions', {}).get('scoring')!r}; its log rescores under "
                f"{rescored_under!r} (rescore the run to compare)",
            )
        for key in _MANIFEST_SAME:
            compare(manifest.get(key), rebuilt_manifest.get(key), key, MANIFEST_FILE, reasons)
        if "min_coverage" in manifest:  # a manifest from before the key has none to check
            compare(
                manifest["min_coverage"],
                rebuilt_manifest.get("min_coverage"),
                "min_coverage",
                MANIFEST_FILE,
                reasons,
            )
        if metrics is not None and (root / RESULTS_FILE).is_file():
            try:
                from_rows = recompute_metrics_from_results(root / RESULTS_FILE, manifest)
            except (ArtifactError, MetricsError) as exc:
                reasons.add(RESULTS_FILE, f"metrics cannot be recomputed from the rows: {exc}")
            else:
                compare(metrics, from_rows, "", "metrics.json vs results.jsonl", reasons)
    summary_path = root / SUMMARY_FILE
    if not summary_path.is_file():
        reasons.add(SUMMARY_FILE, "missing")
    else:
        given = summary_path.read_text(encoding="utf-8", errors="replace")
        rebuilt = (rebuilt_dir / SUMMARY_FILE).read_text(encoding="utf-8")
        if given != rebuilt:
            reasons.add(
                SUMMARY_FILE,
                "differs from the summary rebuilt from the log (first at line "
                f"{first_difference(given, rebuilt)})",
            )
    hint = "" if chain.torn_tail else f"; {found.resume}"
    _explain_unbuilt(rebuilt_manifest, reasons, hint)
    threshold = recorded_threshold([rebuilt_manifest])
    every, short = coverage_lines(rebuilt_metrics, threshold, rebuilt_dir / RESULTS_FILE)
    return attrs.evolve(
        VerifyReport.of(reasons.close(), claim_notes(rebuilt_metrics)),
        coverage=every,
        incomplete=short,
        uncontained=uncontained_arms(
            rebuilt_manifest.get("execution"), rebuilt_manifest.get("arms") or [], arm_versions
        ),
        min_coverage=threshold,
    )
