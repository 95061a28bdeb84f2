"""The verifier: trusts no stored label, recomputes everything, lists every disagreement.

``verify_run`` re-checks a run directory: the log's hash chain (and its final hash and
count against the manifest), the plan hash and pack fingerprint, that every planned
episode's payload and effect come from the plan, then rebuilds every artifact from
the log through the same code path ``rescore`` uses (labels re-derived by judge and
classify from the raw report and the oracle's pre/post readings) and compares,
row by row and metric by metric, with what is on disk.

``verify_submission`` does the same for a leaderboard submission file (format in
docs/leaderboard.md): raw rows in, labels and metrics re-derived, claims compared.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from effectbench.audit.attest import attestations
from effectbench.core.hashing import content_hash
from effectbench.core.model import (
    SPEC_VERSION,
    FailureClass,
    Snapshot,
    TaskSpec,
    trial_params,
    trial_tag,
)
from effectbench.outputs.artifacts import (
    LOG_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    TASK_AXES,
    ArtifactError,
    build_artifacts,
    dump_json,
    recompute_metrics_from_results,
    record_row,
    scoring_version,
    weakest_execution,
)
from effectbench.projections.metrics import MetricsAccumulator, MetricsError, PlanIndex, TaskAxes
from effectbench.scoring.records import EpisodeRecord, EpisodeTelemetry

__all__ = [
    "FLOAT_TOLERANCE",
    "SEED_RULE",
    "SUBMISSION_SCHEMA",
    "VerifyReport",
    "export_submission",
    "verify_run",
    "verify_submission",
]

FLOAT_TOLERANCE: Final = 1e-9
SUBMISSION_SCHEMA: Final = "effectbench.submission/1"
SEED_RULE: Final = "trial_tag = sha256('<task_id>:<trial>')[:12], trials 0..trials-1"
"""The one payload rule this verifier reproduces; a submission declaring another is refused."""
_MAX_PER_SOURCE: Final = 25
"""At most this many differences are listed per compared file; the rest are counted."""
_LABEL_FIELDS: Final = ("true_state", "outcome", "swer_variant", "eligible", "failure_class")
_MANIFEST_SAME: Final = (
    "schema",
    "run_id",
    "versions",
    "recorded_versions",
    "provider",
    "pack_fingerprint",
    "plan_hash",
    "tasks",
    "task_globs",
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


@attrs.frozen
class VerifyReport:
    """ok exactly when reasons is empty; every reason is one line naming where and what."""

    ok: bool
    reasons: list[str]

    @classmethod
    def of(cls, reasons: Sequence[str]) -> VerifyReport:
        return cls(not reasons, list(reasons))


# --------------------------------------------------------------------------- comparison


class _Reasons:
    """Collects reasons, capping each source so a wholesale edit stays readable."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._per: dict[str, int] = {}

    def add(self, source: str, text: str) -> None:
        n = self._per.get(source, 0) + 1
        self._per[source] = n
        if n <= _MAX_PER_SOURCE:
            self.items.append(f"{source}: {text}")

    def remove(self, source: str, text: str) -> bool:
        """Take back a reason another one explains (an artifact an interrupted run never built)."""
        line = f"{source}: {text}"
        if line not in self.items:
            return False
        self.items.remove(line)
        self._per[source] -= 1
        return True

    def close(self) -> list[str]:
        out = list(self.items)
        for source, n in self._per.items():
            if n > _MAX_PER_SOURCE:
                out.append(f"{source}: ... and {n - _MAX_PER_SOURCE} more differences")
        return out


def _same_scalar(claimed: Any, actual: Any) -> bool:
    if isinstance(claimed, bool) or isinstance(actual, bool) or claimed is None or actual is None:
        return type(claimed) is type(actual) and claimed == actual
    if isinstance(claimed, int) and isinstance(actual, int):
        return claimed == actual
    if isinstance(claimed, (int, float)) and isinstance(actual, (int, float)):
        if math.isnan(claimed) or math.isnan(actual):
            return math.isnan(claimed) and math.isnan(actual)
        return abs(claimed - actual) <= FLOAT_TOLERANCE
    return type(claimed) is type(actual) and claimed == actual


def _compare(claimed: Any, actual: Any, path: str, source: str, reasons: _Reasons) -> None:
    """Exact for counts, labels and strings; floats within FLOAT_TOLERANCE."""
    if isinstance(claimed, dict) and isinstance(actual, dict):
        for key in sorted(set(claimed) | set(actual), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in claimed:
                reasons.add(source, f"{sub} is missing (recomputed {_show(actual[key])})")
            elif key not in actual:
                reasons.add(
                    source,
                    f"{sub} is not something the verifier computes (claimed {_show(claimed[key])})",
                )
            else:
                _compare(claimed[key], actual[key], sub, source, reasons)
    elif isinstance(claimed, list) and isinstance(actual, list):
        if len(claimed) != len(actual):
            reasons.add(source, f"{path} has {len(claimed)} entries, recomputed {len(actual)}")
        for i, (c, a) in enumerate(zip(claimed, actual, strict=False)):
            _compare(c, a, f"{path}[{i}]", source, reasons)
    elif not _same_scalar(claimed, actual):
        reasons.add(
            source, f"{path or '(document)'} claimed {_show(claimed)}, recomputed {_show(actual)}"
        )


def _show(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."


def _load_json(path: Path, reasons: _Reasons) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        reasons.add(path.name, "missing")
    except orjson.JSONDecodeError as exc:
        reasons.add(path.name, f"not valid JSON ({exc})")
    except OSError as exc:
        reasons.add(path.name, f"cannot be read ({exc.strerror or exc})")
    return None


# --------------------------------------------------------------------------- run directory


def _plan_checks(
    run_dir: Path, verify_chain: bool, reasons: _Reasons, known_bad_line: int | None = None
) -> None:
    """Plan hash, pack fingerprint, and every episode.planned payload/effect against the plan.

    ``known_bad_line``: a line the chain check already reported; stopping there is no news."""
    from effectbench.core.codec import converter, structure_any_effect
    from effectbench.core.events import TERMINAL_TYPES, ArmScreenshot
    from effectbench.evidence import check_blob
    from effectbench.log.reader import LogCorrupt, LogError, read_log
    from effectbench.run.plan import episode_id, hash_identity, pack_fingerprint

    source = LOG_FILE
    tasks: dict[str, TaskSpec] = {}
    expected_hash: dict[tuple[str, int], tuple[dict[str, str], str]] = {}
    try:
        events = iter(read_log(run_dir / LOG_FILE, verify=verify_chain))
        for ev in events:
            if ev.type == "run.started" and ev.ep is None:
                plan = ev.data.get("plan") or {}
                if hash_identity(plan) != ev.data.get("plan_hash"):
                    reasons.add(
                        source,
                        f"plan_hash in run.started (#{ev.seq}) does not hash the plan it carries",
                    )
                try:
                    specs = [converter.structure(t, TaskSpec) for t in plan.get("tasks", ())]
                except Exception as exc:  # noqa: BLE001 - untrusted log content
                    reasons.add(source, f"the plan's tasks cannot be rebuilt: {exc}")
                    return
                if pack_fingerprint(specs) != plan.get("pack_fingerprint"):
                    reasons.add(source, "pack fingerprint in the plan does not match its tasks")
                if [t.task_id for t in specs] != list(plan.get("task_ids") or []):
                    reasons.add(source, "the plan's task_ids differ from its tasks")
                tasks = {t.task_id: t for t in specs}
                break
        else:
            reasons.add(source, "no run.started event: the log does not carry its plan")
            return
        terminated: set[str] = set()
        blobs: dict[tuple[str, str], str | None] = {}
        for ev in events:
            if ev.type in TERMINAL_TYPES and ev.ep is not None:
                terminated.add(ev.ep)
                continue
            if ev.type == ArmScreenshot.TYPE:  # one image is hashed once, however often cited
                cited = (str(ev.data.get("sha256")), str(ev.data.get("path")))
                if cited not in blobs:
                    blobs[cited] = check_blob(run_dir, ev.data)
                why = blobs[cited]
                if why is not None:
                    reasons.add(source, f"event #{ev.seq} ({ev.ep}): screenshot {why}")
                continue
            if ev.type != "episode.planned":
                continue
            d = ev.data
            if ev.ep in terminated:
                reasons.add(
                    source,
                    f"event #{ev.seq} plans episode {ev.ep} again after it terminated: the rerun "
                    "would replace the scored attempt (the scheduler never reruns a finished episode)",
                )
            task = tasks.get(str(d.get("task_id")))
            trial = d.get("trial")
            if task is None or not isinstance(trial, int):
                reasons.add(
                    source,
                    f"event #{ev.seq} plans episode {ev.ep} for a task or trial not in the plan",
                )
                continue
            own_id = episode_id(str(d.get("arm")), task.task_id, trial)
            if ev.ep != own_id:
                reasons.add(
                    source,
                    f"event #{ev.seq} plans ({d.get('arm')}, {task.task_id}, {trial}) under the id "
                    f"{ev.ep!r}, not {own_id!r}: a second id for one planned episode would replace it",
                )
            key = (task.task_id, trial)
            if key not in expected_hash:
                params = trial_params(task, trial)
                expected_hash[key] = (params, content_hash(task.expected_effect.resolve(params)))
            params, effect_hash = expected_hash[key]
            if d.get("params") != params:
                reasons.add(
                    source,
                    f"event #{ev.seq} ({ev.ep}): params are not the trial payload of ({task.task_id}, {trial})",
                )
            try:
                logged = structure_any_effect(d.get("effect")).resolve(d.get("params") or {})
                logged_hash = content_hash(logged)
            except Exception:  # noqa: BLE001 - untrusted log content
                logged_hash = None
            if logged_hash != effect_hash or d.get("effect_hash") != effect_hash:
                reasons.add(
                    source,
                    f"event #{ev.seq} ({ev.ep}): the effect scored is not the plan's effect for this trial",
                )
            for field in TASK_AXES:
                want = _axis(task, field)
                if d.get(field) != want:
                    reasons.add(
                        source,
                        f"event #{ev.seq} ({ev.ep}): {field} {d.get(field)!r} differs from the plan",
                    )
    except LogError as exc:
        if not (isinstance(exc, LogCorrupt) and exc.line_no == known_bad_line):
            reasons.add(source, f"cannot be read past {exc}")


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any] | None]]:
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                yield n, None
                continue
            yield n, row if isinstance(row, dict) else None


def _compare_results(given: Path, rebuilt: Path, reasons: _Reasons) -> None:
    source = RESULTS_FILE
    if not given.is_file():
        reasons.add(source, "missing")
        return
    want: dict[str, tuple[int, dict[str, Any]]] = {}
    for n, row in _rows(rebuilt):
        assert row is not None
        want[row["episode_id"]] = (n, row)
    seen: set[str] = set()
    for n, row in _rows(given):
        if row is None or not isinstance(row.get("episode_id"), str):
            reasons.add(source, f"line {n} is not a results row")
            continue
        ep = row["episode_id"]
        if ep in seen:
            reasons.add(source, f"line {n}: episode {ep} appears twice")
            continue
        seen.add(ep)
        if ep not in want:
            reasons.add(source, f"line {n}: episode {ep} is not in the log")
            continue
        expected_line, expected = want[ep]
        if expected_line != n:
            reasons.add(
                source, f"line {n}: episode {ep} belongs on line {expected_line} (plan order)"
            )
        for field in _LABEL_FIELDS:
            if row.get(field) != expected.get(field):
                reasons.add(
                    source,
                    f"line {n} ({ep}): {field} {row.get(field)!r} but the log re-derives {expected.get(field)!r}",
                )
        rest_claimed = {k: v for k, v in row.items() if k not in _LABEL_FIELDS}
        rest_actual = {k: v for k, v in expected.items() if k not in _LABEL_FIELDS}
        _compare(rest_claimed, rest_actual, f"line {n} ({ep})", source, reasons)
    for ep, (n, _) in want.items():
        if ep not in seen:
            reasons.add(source, f"episode {ep} (line {n} of the rebuilt results) is missing")


def _first_difference(a: str, b: str) -> int:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb, strict=False), 1):
        if x != y:
            return i
    return min(len(la), len(lb)) + 1


def _explain_unbuilt(rebuilt_manifest: Mapping[str, Any], reasons: _Reasons, hint: str) -> None:
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
    reasons = _Reasons()
    if not (root / LOG_FILE).is_file():
        return VerifyReport.of([f"{root}: no {LOG_FILE}; give a run directory"])
    manifest = _load_json(root / MANIFEST_FILE, reasons)
    metrics = _load_json(root / METRICS_FILE, reasons)
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
    _plan_checks(root, verify_chain=False, reasons=reasons, known_bad_line=chain.first_bad_line)
    with tempfile.TemporaryDirectory(prefix="effectbench-verify-") as tmp:
        rebuilt_dir = Path(tmp)
        try:
            build_artifacts(root, out_dir=rebuilt_dir, verify_chain=False, attest=attestations)
        except ArtifactError as exc:
            if bad is None or bad not in str(exc):  # else the chain line above says it all
                reasons.add(LOG_FILE, f"labels and metrics cannot be re-derived: {exc}")
            return VerifyReport.of(reasons.close())
        _compare_results(root / RESULTS_FILE, rebuilt_dir / RESULTS_FILE, reasons)
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
            _compare(metrics, rebuilt_metrics, "", METRICS_FILE, reasons)
        if isinstance(manifest, dict):
            rescored_under = rebuilt_manifest.get("versions", {}).get("scoring")
            if manifest.get("versions", {}).get("scoring") != rescored_under:
                reasons.add(
                    MANIFEST_FILE,
                    f"scored under scoring version {manifest.get('versions', {}).get('scoring')!r}; its log "
                    f"rescores under {rescored_under!r} (rescore the run to compare)",
                )
            for key in _MANIFEST_SAME:
                _compare(manifest.get(key), rebuilt_manifest.get(key), key, MANIFEST_FILE, reasons)
            if metrics is not None and (root / RESULTS_FILE).is_file():
                try:
                    from_rows = recompute_metrics_from_results(root / RESULTS_FILE, manifest)
                except (ArtifactError, MetricsError) as exc:
                    reasons.add(RESULTS_FILE, f"metrics cannot be recomputed from the rows: {exc}")
                else:
                    _compare(metrics, from_rows, "", "metrics.json vs results.jsonl", reasons)
        summary_path = root / SUMMARY_FILE
        if not summary_path.is_file():
            reasons.add(SUMMARY_FILE, "missing")
        else:
            given = summary_path.read_text(encoding="utf-8", errors="replace")
            rebuilt = (rebuilt_dir / SUMMARY_FILE).read_text(encoding="utf-8")
            if given != rebuilt:
                reasons.add(
                    SUMMARY_FILE,
                    f"differs from the summary rebuilt from the log (first at line {_first_difference(given, rebuilt)})",
                )
        _explain_unbuilt(rebuilt_manifest, reasons, "" if chain.torn_tail else f"; {resume}")
    return VerifyReport.of(reasons.close())


# --------------------------------------------------------------------------- submissions


def export_submission(
    run_dir: str | os.PathLike[str], system: str, out_path: str | os.PathLike[str]
) -> Path:
    """Write one arm of a run as a leaderboard submission (docs/leaderboard.md): the raw
    rows (report, oracle readings, payload, effect), the claimed metrics, and the
    reproducibility block. Labels in it are for reading; the verifier re-derives them."""
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
            for key in ("planned", "pre_snapshot", "post_read")
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
        }
        rows.append(row)
    claimed = MetricsAccumulator(index).add_all(records).arm_metrics(0)
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
        },
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


def _major(version: Any) -> str | None:
    return version.split(".", 1)[0] if isinstance(version, str) and version else None


def _axis(task: TaskSpec, field: str) -> Any:
    """A task axis as rows and logged events carry it (enums by value)."""
    want = getattr(task, field)
    return want.value if hasattr(want, "value") else want


def _num_or_none(value: Any) -> Any:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _rederive(
    where: str, row: Mapping[str, Any], task: TaskSpec, trial: int, reasons: _Reasons, source: str
) -> EpisodeRecord | None:
    """The row's labels from its raw fields; every mismatch with its claims is a reason."""
    from effectbench.core.codec import converter, structure_any_effect
    from effectbench.scoring.labels import score_episode

    params = trial_params(task, trial)
    tag = trial_tag(task.task_id, trial)
    row_params = row.get("params")
    if not isinstance(row_params, dict):
        reasons.add(source, f"{where}: params missing; the trial payload cannot be checked")
    elif any("{tag}" in t for t in task.params.values()) and not any(
        isinstance(v, str) and tag in v for v in row_params.values()
    ):
        reasons.add(
            source,
            f"{where}: params carry no trial tag {tag} for ({task.task_id}, trial {trial}); "
            "the declared trials/seeds do not reproduce this payload",
        )
    elif row_params != params:
        reasons.add(
            source, f"{where}: params differ from the payload the declared trials/seeds give"
        )
    effect = task.expected_effect.resolve(params)
    effect_hash = content_hash(effect)
    try:
        row_effect_hash = content_hash(structure_any_effect(row.get("effect")))
    except Exception:  # noqa: BLE001 - untrusted submission content
        row_effect_hash = None
    if row_effect_hash != effect_hash or row.get("effect_hash") != effect_hash:
        reasons.add(source, f"{where}: effect is not the task's declared effect for this trial")
    for field in TASK_AXES:
        want = _axis(task, field)
        if row.get(field) != want:
            reasons.add(
                source, f"{where}: {field} {row.get(field)!r} differs from the task's {want!r}"
            )

    reported = row.get("reported_success")
    claimed_fc = row.get("failure_class")
    post_raw = row.get("post_snapshot")
    expected: dict[str, Any]
    verdict_reasons: tuple[str, ...] = ()
    if (
        isinstance(reported, bool)
        and post_raw is not None
        and claimed_fc in (None, FailureClass.EVALUATION.value)
    ):
        try:
            post = converter.structure(post_raw, Snapshot)
            pre_raw = row.get("pre_snapshot")
            pre = (
                converter.structure(pre_raw, Snapshot)
                if pre_raw is not None
                else Snapshot.unreadable("no pre-snapshot in the row")
            )
        except Exception as exc:  # noqa: BLE001 - untrusted submission content
            reasons.add(source, f"{where}: oracle readings are malformed ({exc})")
            return None
        verdict, cls = score_episode(
            effect,
            pre,
            post,
            reported_success=reported,
            correct_action_available=task.correct_action_available,
        )
        verdict_reasons = verdict.reasons
        expected = {
            "true_state": verdict.true_state.value,
            "outcome": None if cls.outcome is None else cls.outcome.value,
            "swer_variant": None if cls.swer_variant is None else cls.swer_variant.value,
            "eligible": cls.scoreable,
            "failure_class": None if cls.scoreable else FailureClass.EVALUATION.value,
        }
    else:
        try:
            fc = FailureClass(str(claimed_fc))
        except ValueError:
            reasons.add(
                source,
                f"{where}: no agent report and oracle reading to score, and no valid failure_class "
                f"({claimed_fc!r}) saying why",
            )
            return None
        expected = {
            "true_state": None,
            "outcome": None,
            "swer_variant": None,
            "eligible": False,
            "failure_class": fc.value,
        }
    for field in _LABEL_FIELDS:
        if field == "true_state" and expected["true_state"] is None:
            continue  # a failed episode may or may not state an unreadable reading
        if row.get(field) != expected[field]:
            reasons.add(
                source,
                f"{where}: {field} claimed {row.get(field)!r}, re-derived {expected[field]!r}",
            )
    from effectbench.core.model import Outcome, SwerVariant, TrueState

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
        verdict_reasons=verdict_reasons,
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
    reasons = _Reasons()
    source = p.name
    doc = _load_json(p, reasons)
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
            f"pack_fingerprint {doc.get('pack_fingerprint')!r} does not match its tasks ({fingerprint})",
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
            f"scoring_version {repro.get('scoring_version')!r} is not this verifier's {scoring_version()!r}",
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
    if not isinstance(claimed, dict):
        reasons.add(source, "claimed metrics missing (an object with the metrics.json arm block)")
    else:
        _compare(claimed, acc.arm_metrics(0), "claimed", source, reasons)
    return VerifyReport.of(reasons.close())
