"""The run directory's derived artifacts, all from events.jsonl by ONE code path.

``build_artifacts`` (the end of a run, and the verifier) and ``rescore_artifacts``
(``effectbench rescore``) share one pass: it streams the log through the episode
projection into the metrics accumulator and writes results.jsonl, manifest.json,
metrics.json and summary.md. Nothing in them depends on the clock of the rescore or
on the order episodes completed in, so a rescore of the same log with the same code
is byte-identical.

The one difference is the run's record of how it ended (manifest ``log`` and
``run_finished``): the end of a run derives it from the log it has just written; a
rescore keeps the recorded one and refuses a log that disagrees with it, so it never
turns a cut or re-chained log into one the verifier calls sound.

Memory stays flat: result rows spill to a temporary file, copied out in plan order.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs
import orjson

from effectbench.core.errors import ArtifactError
from effectbench.core.events import SCHEMA_ID
from effectbench.core.model import (
    SPEC_VERSION,
)
from effectbench.core.rundir import (
    ARTIFACT_FILES,
    LOG_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
)
from effectbench.log.reader import LogError
from effectbench.outputs.coverage import recorded_threshold
from effectbench.outputs.logpass import LogPass, PlanFacts, RunFacts, sequential_pass, write_atomic
from effectbench.outputs.rows import TASK_AXES, record_from_row, record_row
from effectbench.outputs.summary import render_summary
from effectbench.projections.metrics import (
    FIRST_ELIGIBLE,
    MetricsAccumulator,
    MetricsError,
    PlanIndex,
)
from effectbench.scoring.stats import Z95

__all__ = [
    "ARTIFACT_FILES",
    "LOG_FILE",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "RESULTS_FILE",
    "SUMMARY_FILE",
    "TASK_AXES",
    "ArtifactError",
    "ArtifactSet",
    "build_artifacts",
    "dump_json",
    "manifest_plan_index",
    "recompute_metrics_from_results",
    "record_from_row",
    "record_row",
    "render_summary",
    "rescore_artifacts",
    "scoring_version",
]

MANIFEST_SCHEMA: Final = "effectbench.manifest/1"
_JSON_OPTS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2


@attrs.frozen
class ArtifactSet:
    run_dir: Path
    results: Path
    manifest: Path
    metrics: Path
    summary: Path
    events: int
    episodes: int
    final_hash: str
    incomplete: str | None = None
    """Set by a rescore with ``allow_incomplete``: why the log is not the one its run
    finished with (the artifacts are for reading; verify does not call them sound)."""


def scoring_version() -> str:
    from effectbench.core import versions

    return versions.SCORING_VERSION


def scored_under(plan_versions: Mapping[str, Any]) -> str:
    """The scoring version a run's episodes are judged under: the one its plan names when
    this code knows it (old runs rescore as they were scored), else this code's."""
    from effectbench.scoring.labels import scoring_version_of

    return scoring_version_of(plan_versions.get("scoring"))


def dump_json(value: Any) -> bytes:
    """The one JSON form of every artifact: sorted keys, 2-space indent, trailing newline."""
    return orjson.dumps(value, option=_JSON_OPTS) + b"\n"


@attrs.frozen
class _RunRecord:
    """How the run ended, as manifest.json states it: ``log`` (event count, final hash,
    torn tail) and ``run_finished`` (the last run.finished); None where there is none."""

    log: Mapping[str, Any] | None
    run_finished: Mapping[str, Any] | None

    @classmethod
    def of(cls, lp: LogPass) -> _RunRecord:
        """The record a run that ends now writes: what its log holds."""
        log = {
            "file": LOG_FILE,
            "events": lp.count,
            "final_hash": lp.last_hash,
            "torn_tail": lp.torn_tail,
        }
        finished = lp.facts.finished
        return cls(log, None if finished is None else dict(finished))

    @classmethod
    def recorded(cls, manifest_path: Path) -> _RunRecord | None:
        """The record in an existing manifest.json; None when there is none to read."""
        try:
            manifest = orjson.loads(manifest_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("log"), dict):
            return None
        return cls(manifest["log"], manifest.get("run_finished"))


_NO_RECORD: Final = _RunRecord(None, None)
_ANYWAY: Final = (
    "; to score it anyway, pass --allow-incomplete (`effectbench verify` will still not call "
    "the run sound)"
)


@attrs.frozen
class _Rescore:
    """What a rescore brings: the run's record, and whether to score a log at odds with it."""

    record: _RunRecord | None
    allow_incomplete: bool


def _ended(lp: LogPass) -> bool:
    """The log's last event is a run.finished that does not say the run was interrupted."""
    facts = lp.facts
    return (
        facts.finished is not None
        and facts.finished_seq == lp.count - 1
        and not facts.finished.get("interrupted")
    )


def _not_as_recorded(lp: LogPass, record: _RunRecord | None, run_dir: Path) -> str | None:
    """Why the log is not the one its run finished with; None when it is."""
    ended = _ended(lp)
    if record is None:
        if not ended:
            return (
                f"the run in {run_dir} was interrupted and has not been resumed (its log does "
                f"not end with run.finished); continue it with `effectbench run --resume {run_dir}`"
            )
        return (
            f"{run_dir} has no record of how its run ended (the {MANIFEST_FILE} a finished run "
            "writes, with the log's final hash and event count), so a cut or re-chained log "
            "cannot be told from a complete one"
        )
    if ended and record == _RunRecord.of(lp):
        return None
    said = record.log or {}
    return (
        f"{run_dir / LOG_FILE} is not the log its run finished with: the run recorded "
        f"{said.get('events')} events ending in hash {str(said.get('final_hash'))[:12]}, the "
        f"log holds {lp.count} ending in {lp.last_hash[:12]}"
        + (", then a torn line" if lp.torn_tail else "")
        + ("" if ended else ", and it does not end with run.finished")
        + "; it was cut, extended or rewritten after the run"
    )


def _edited_evidence(lp: LogPass, run_dir: Path) -> str | None:
    """Why an evidence blob the log cites (a screenshot) is not the one recorded, as the
    verifier checks it (effectbench.core.evidence.check_blob); None when every one is."""
    from effectbench.core.evidence import check_blob

    bad = []
    for (digest, path), seq in sorted(lp.facts.cited.items(), key=lambda kv: kv[1]):
        why = check_blob(run_dir, {"sha256": digest, "path": path})
        if why is not None:
            bad.append(f"event #{seq}: screenshot {why}")
    if not bad:
        return None
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return (
        f"{run_dir} holds evidence that is not what its log recorded: {bad[0]}{more}; "
        "restore the blob from the original run directory"
    )


def build_artifacts(
    run_dir: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    verify_chain: bool = True,
    workers: int | None = None,
    attest: Attester | None = None,
) -> ArtifactSet:
    """Stream ``<run_dir>/events.jsonl`` once and (re)write the four derived artifacts,
    with the record of how the run ended taken from the log: what the end of a run
    writes, and what the verifier rebuilds to compare with.

    ``out_dir`` (default: the run directory) lets the verifier rebuild them elsewhere
    through this same path; ``verify_chain=False`` is only for diagnosing a log whose
    chain is already known to be broken. ``workers``: None decides by log size and
    machine (effectbench.outputs.parallel: every core for a large log), 1 forces the
    one-process pass, N > 1 the sharded one on N processes. All give byte-identical
    artifacts; the sharded pass hands any problem to the one-process pass, so errors are
    always the same.
    """
    return _build(Path(run_dir), out_dir, verify_chain, workers, None, attest)


def rescore_artifacts(
    run_dir: str | os.PathLike[str],
    *,
    allow_incomplete: bool = False,
    workers: int | None = None,
    attest: Attester | None = None,
) -> ArtifactSet:
    """``effectbench rescore``: rebuild the artifacts in place, keeping the record of how
    the run ended that its manifest.json holds (a rescore never writes one).

    Refuses, writing nothing, while a run holds the log's lock, and when the log is not
    the one the run finished with: no run.finished at its end (an interrupted run, to
    resume), no record to check it against, or a count or final hash other than the
    recorded ones. ``allow_incomplete`` scores such a log anyway; its manifest then
    keeps the recorded values (or none), so the verifier still fails it.
    """
    from effectbench.run.runlock import share_run_lock

    root = Path(run_dir)
    with share_run_lock(root / LOG_FILE) as free:
        if not free:
            raise ArtifactError(
                f"{root} is in use by a run that has not ended; rescore it after the run "
                "finishes (or is stopped)"
            )
        rescore = _Rescore(_RunRecord.recorded(root / MANIFEST_FILE), allow_incomplete)
        return _build(root, None, True, workers, rescore, attest)


def _build(
    run_dir: Path,
    out_dir: str | os.PathLike[str] | None,
    verify_chain: bool,
    workers: int | None,
    rescore: _Rescore | None,
    attest: Attester | None,
) -> ArtifactSet:
    from effectbench.projections.episodes import ProjectionError

    log_path = run_dir / LOG_FILE
    root = Path(out_dir) if out_dir is not None else run_dir
    if not log_path.is_file():
        raise ArtifactError(
            f"no {LOG_FILE} in {run_dir}; give the run directory that holds the event log"
        )
    lp: LogPass | None = None
    try:
        if verify_chain:
            from effectbench.outputs.parallel import sharded_pass, worker_count

            n = worker_count(log_path, workers)
            if n > 1:
                lp = sharded_pass(log_path, root, n)
        if lp is None:
            lp = sequential_pass(log_path, root, verify_chain)
        plan = lp.facts.plan_facts()
        record, incomplete = _RunRecord.of(lp), None
        if rescore is not None:
            incomplete = _not_as_recorded(lp, rescore.record, run_dir) or _edited_evidence(
                lp, run_dir
            )
            if incomplete is not None and not rescore.allow_incomplete:
                raise ArtifactError(incomplete + _ANYWAY)
            record = rescore.record or _NO_RECORD
        acc = lp.acc if lp.acc is not None else MetricsAccumulator(plan.index)
        metrics = acc.document(scored_under(plan.versions))
        manifest = _manifest(lp.facts, plan, acc, record, log_path, attest)
        results_tmp = root / (RESULTS_FILE + ".tmp")
        with open(results_tmp, "wb") as out:
            if lp.spill is not None:
                lp.spill.write_ordered(out)
        os.replace(results_tmp, root / RESULTS_FILE)
    except LogError as exc:
        raise ArtifactError(
            f"{log_path}: {exc}; run `effectbench verify {run_dir}` for every problem"
        ) from None
    except (ProjectionError, MetricsError) as exc:
        raise ArtifactError(f"{log_path}: {exc}") from None
    except OSError as exc:
        raise ArtifactError(f"cannot write artifacts in {root}: {exc.strerror or exc}") from None
    finally:
        if lp is not None and lp.spill is not None:
            lp.spill.close()
    write_atomic(root / METRICS_FILE, dump_json(metrics))
    write_atomic(root / MANIFEST_FILE, dump_json(manifest))
    write_atomic(root / SUMMARY_FILE, render_summary(manifest, metrics).encode("utf-8"))
    return ArtifactSet(
        run_dir=root,
        results=root / RESULTS_FILE,
        manifest=root / MANIFEST_FILE,
        metrics=root / METRICS_FILE,
        summary=root / SUMMARY_FILE,
        events=lp.count,
        episodes=lp.episodes,
        final_hash=lp.last_hash,
        incomplete=incomplete,
    )


# --------------------------------------------------------------------------- manifest


def _dependency_versions() -> dict[str, str | None]:
    import importlib_metadata

    try:
        requires = importlib_metadata.distribution("effectbench").requires or []
    except importlib_metadata.PackageNotFoundError:
        return {}
    out: dict[str, str | None] = {}
    for req in requires:
        if ";" in req and "extra" in req.split(";", 1)[1]:
            continue
        name = re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0]
        try:
            out[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            out[name] = None
    return dict(sorted(out.items()))


Attester = Callable[[Sequence[str], Path], Mapping[str, Any]]
"""(the run's arms, its log) -> the manifest's ``attestations``: the caller passes the
audit's (effectbench.audit.checks.attestations), so writing artifacts never imports the
audit, which can run whole evaluations."""

NOT_ATTESTED: Final = {"adversarially_audited": None, "source": "not attested by this build"}


def _manifest(
    facts: RunFacts,
    plan: PlanFacts,
    acc: MetricsAccumulator,
    record: _RunRecord,
    log_path: Path,
    attest: Attester | None,
) -> dict[str, Any]:
    from effectbench.core import versions

    started = facts.started or {}
    recorded_versions = dict(started.get("versions") or plan.versions)
    codes = acc.codes
    return {
        "schema": MANIFEST_SCHEMA,
        "run_id": started.get("run_id"),
        "versions": {
            "package": versions.PACKAGE_VERSION,
            "spec": SPEC_VERSION,
            "scoring": scored_under(plan.versions),
            "events_schema": SCHEMA_ID,
        },
        "recorded_versions": recorded_versions,
        "provider": dict(plan.provider),
        "pack_fingerprint": plan.pack_fingerprint,
        "fixture": plan.fixture,
        "plan_hash": started.get("plan_hash"),
        "tasks": plan.tasks,
        **plan.selection(),
        "arms": list(acc.plan.arms),
        "trials": acc.plan.trials,
        "k": acc.plan.k,
        "concurrency": started.get("concurrency"),
        "resumes": facts.resumes,
        **execution_facts(started, facts.resumes, acc.plan.arms),
        "min_coverage": recorded_threshold([started, *facts.resumes]),
        "z": Z95,
        "episodes": {
            "planned": len(acc.plan),
            "recorded": len(codes) - codes.count(0),
            "eligible": sum(1 for c in codes if c >= FIRST_ELIGIBLE),
        },
        "run_finished": None if record.run_finished is None else dict(record.run_finished),
        "log": None if record.log is None else dict(record.log),
        "artifacts": list(ARTIFACT_FILES),
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
        },
        "platform": {
            "system": platform.system(),
            "machine": platform.machine(),
            "release": platform.release(),
        },
        "dependencies": _dependency_versions(),
        "attestations": dict(NOT_ATTESTED if attest is None else attest(acc.plan.arms, log_path)),
    }


EXECUTION_ORDER: Final = ("in_process", "subprocess", "isolated")
"""How an arm ran, weakest containment first."""


def weakest_execution(modes: Iterable[Any]) -> str | None:
    """The weakest of the modes a run's sessions recorded for one arm; None when any
    session recorded none (a log from before the field, or an unknown value)."""
    rank = None
    for mode in modes:
        if mode not in EXECUTION_ORDER:
            return None
        r = EXECUTION_ORDER.index(mode)
        rank = r if rank is None else min(rank, r)
    return None if rank is None else EXECUTION_ORDER[rank]


def execution_facts(
    started: Mapping[str, Any], resumes: Sequence[Mapping[str, Any]], arms: Sequence[str]
) -> dict[str, Any]:
    """The manifest's ``execution`` (per arm, the weakest over the run and its resumes)
    and ``containment`` (why protocol agents were not contained, when they were not)."""
    sessions = [started, *resumes]
    execution = {
        arm: weakest_execution((s.get("execution") or {}).get(arm) for s in sessions)
        for arm in arms
    }
    notes = sorted({str(s["containment"]) for s in sessions if s.get("containment")})
    return {"execution": execution, "containment": "; ".join(notes) or None}


def manifest_plan_index(manifest: Mapping[str, Any]) -> PlanIndex:
    """The planned episode set as the manifest states it."""
    return PlanIndex.from_plan(manifest)


# --------------------------------------------------------------------------- recompute and render


def recompute_metrics_from_results(
    results_path: str | os.PathLike[str], manifest: Mapping[str, Any]
) -> dict[str, Any]:
    """metrics.json's content from results.jsonl rows alone (same accumulator, same shape)."""
    acc = MetricsAccumulator(manifest_plan_index(manifest), float(manifest.get("z", Z95)))
    with open(results_path, "rb") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                acc.add(record_from_row(orjson.loads(line)))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ArtifactError(
                    f"{results_path} line {line_no}: not a results row ({exc})"
                ) from None
    version = (manifest.get("versions") or {}).get("scoring") or scoring_version()
    return acc.document(str(version))
