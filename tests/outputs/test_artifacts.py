"""Run-directory artifacts built from a synthetic events.jsonl (real log writer, real typed
events, no scheduler): they agree with each other, rescore byte-identically, and
metrics.json can be recomputed from results.jsonl alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from synthetic_run import (
    TASKS,
    Scenario,
    make_plan,
    read_rows,
    write_run,
)

from effectbench.audit.attest import attestations
from effectbench.core.model import (
    TaskSpec,
    trial_params,
)
from effectbench.outputs.artifacts import (
    ARTIFACT_FILES,
    ArtifactError,
    build_artifacts,
    recompute_metrics_from_results,
    record_from_row,
)
from effectbench.run.plan import episode_id, episodes

# --------------------------------------------------------------------------- synthetic runs


"""success | phantom | duplicate | wrong_field | over_halt | false_abort | fail_env | unreadable
| unfinished"""


def load(run_dir: Path, name: str) -> Any:
    return orjson.loads((run_dir / name).read_bytes())


def drop_timing(value: Any) -> Any:
    """Everything but the clearly separated timing/position keys."""
    if isinstance(value, dict):
        return {
            k: drop_timing(v)
            for k, v in value.items()
            if k not in ("telemetry", "evidence", "concurrency", "resumes", "log")
        }
    if isinstance(value, list):
        return [drop_timing(v) for v in value]
    return value


# --------------------------------------------------------------------------- tests


@pytest.fixture
def run(tmp_path: Path) -> Path:
    d = write_run(tmp_path / "run")
    build_artifacts(d, attest=attestations)
    return d


def test_writes_all_four_artifacts(run: Path) -> None:
    for name in ARTIFACT_FILES:
        assert (run / name).is_file()
    assert not [p.name for p in run.iterdir() if p.name.endswith((".tmp", ".spill"))]


def test_results_rows_in_plan_order_with_labels_evidence_and_null_telemetry(run: Path) -> None:
    rows = read_rows(run)
    plan = make_plan()
    assert [r["episode_id"] for r in rows] == [
        episode_id(s.arm, s.task.task_id, s.trial) for s in episodes(plan)
    ]
    by_id = {r["episode_id"]: r for r in rows}
    dup = by_id["screen_only::c2-dup::t0"]
    assert (dup["outcome"], dup["swer_variant"], dup["true_state"], dup["eligible"]) == (
        "SILENT_WRONG_EFFECT",
        "wrong_write",
        "WRONG_PERSISTED",
        True,
    )
    assert by_id["screen_only::ctl-none::t0"]["swer_variant"] == "phantom"
    failed = by_id["screen_only::ctl-ok::t2"]
    assert (failed["eligible"], failed["failure_class"], failed["outcome"]) == (
        False,
        "environment",
        None,
    )
    assert failed["telemetry"]["wall_ms"] is None and failed["telemetry"]["model_calls"] is None
    unreadable = by_id["effect_verified::ctl-ok::t1"]
    assert (unreadable["true_state"], unreadable["eligible"], unreadable["failure_class"]) == (
        "UNREADABLE",
        False,
        "evaluation",
    )
    assert dup["category"] == "C2_duplicate_submission" and dup["substrate"] == "web"
    # evidence pointers name real log lines of this episode
    lines = (run / "events.jsonl").read_bytes().splitlines()
    for kind, pointer in dup["evidence"].items():
        file, seq = pointer.split("#")
        event = orjson.loads(lines[int(seq)])
        assert (
            file == "events.jsonl" and event["ep"] == dup["episode_id"] and event["seq"] == int(seq)
        )
        assert kind in ("planned", "pre_snapshot", "reported", "post_read", "terminal")


def test_metrics_shape_and_values(run: Path) -> None:
    m = load(run, "metrics.json")
    assert m["schema"] == "effectbench.metrics/1"
    assert set(m["arms"]) == {"screen_only", "effect_verified"}
    a = m["arms"]["screen_only"]
    for key in (
        "swer",
        "swer_wrong_write",
        "swer_phantom",
        "over_halt",
        "task_success",
        "screen_success",
    ):
        assert set(a[key]) == {"numerator", "denominator", "rate", "ci95"}
    for key in ("n_episodes", "n_eligible", "coverage", "gap", "outcome_counts", "cells"):
        assert key in a
    for key in ("pass_at_1", "pass_at_k", "pass_pow_k", "pass_hat_k"):
        assert key in a
    # screen_only: 12 planned, 1 failed -> 11 eligible; SWER = 2 wrong_field + 2 duplicate + 3
    # phantom
    assert (a["n_episodes"], a["n_eligible"]) == (12, 11)
    assert (a["swer"]["numerator"], a["swer"]["denominator"]) == (7, 11)
    assert a["swer_wrong_write"]["numerator"] == 4 and a["swer_phantom"]["numerator"] == 3
    assert a["outcome_counts"]["success"] == 4
    e = m["arms"]["effect_verified"]
    assert e["failure_counts"]["evaluation"] == 1 and e["n_eligible"] == 11
    assert e["over_halt"]["numerator"] == 2 and e["outcome_counts"]["safe_halt"] == 3
    assert [c["first"] for c in m["comparisons"]] == ["screen_only"]


def test_artifacts_agree(run: Path) -> None:
    rows = read_rows(run)
    manifest = load(run, "manifest.json")
    metrics = load(run, "metrics.json")
    summary = (run / "summary.md").read_text()
    assert manifest["episodes"]["recorded"] == len(rows)
    assert manifest["episodes"]["eligible"] == sum(r["eligible"] for r in rows)
    assert manifest["episodes"]["planned"] == sum(a["n_episodes"] for a in metrics["arms"].values())
    assert manifest["arms"] == metrics["arm_order"] and manifest["k"] == metrics["k"] == 3
    assert manifest["versions"]["scoring"] == metrics["scoring_version"]
    for arm, block in metrics["arms"].items():
        mine = [r for r in rows if r["arm"] == arm]
        assert block["n_eligible"] == sum(r["eligible"] for r in mine)
        assert block["swer"]["numerator"] == sum(
            r["outcome"] == "SILENT_WRONG_EFFECT" for r in mine
        )
        swer = block["swer"]
        assert f"{swer['numerator']}/{swer['denominator']}" in summary
        assert f"| {arm} |" in summary
    # every count in the summary's headline comes from metrics.json
    assert "SWER" in summary and "over-halt" in summary and "UNREADABLE" in summary


def test_summary_never_shows_swer_without_over_halt(run: Path) -> None:
    summary = (run / "summary.md").read_text()
    text_lines = [ln for ln in summary.splitlines() if "SWER" in ln and not ln.startswith("|")]
    assert text_lines and all("over-halt" in ln for ln in text_lines), text_lines
    headers = [ln for ln in summary.splitlines() if ln.startswith(("| arm |", "| category |"))]
    swer_headers = [ln for ln in headers if "SWER" in ln]
    assert swer_headers and all("over-halt" in ln for ln in swer_headers), swer_headers
    # comparison rows: one over-halt row for every SWER row
    comparison = summary.split("## Comparisons", 1)[1].split("\n## ", 1)[0]
    assert comparison.count("| SWER |") == comparison.count("| over-halt |") == 1


def test_metrics_recomputed_from_results_alone(run: Path) -> None:
    manifest = load(run, "manifest.json")
    recomputed = recompute_metrics_from_results(run / "results.jsonl", manifest)
    assert recomputed == load(run, "metrics.json")


def test_rescore_is_byte_identical(run: Path) -> None:
    before = {name: (run / name).read_bytes() for name in ARTIFACT_FILES}
    for name in ARTIFACT_FILES:
        (run / name).unlink()
    build_artifacts(run, attest=attestations)
    assert {name: (run / name).read_bytes() for name in ARTIFACT_FILES} == before
    build_artifacts(run, attest=attestations)  # over existing files too
    assert {name: (run / name).read_bytes() for name in ARTIFACT_FILES} == before


def test_non_timing_fields_identical_across_concurrency(tmp_path: Path) -> None:
    one = write_run(tmp_path / "c1", concurrency=1)
    many = write_run(tmp_path / "c8", concurrency=8, seed=7)
    build_artifacts(one, attest=attestations)
    build_artifacts(many, attest=attestations)
    assert (one / "events.jsonl").read_bytes() != (many / "events.jsonl").read_bytes()
    assert drop_timing(load(one, "metrics.json")) == drop_timing(load(many, "metrics.json"))
    assert [drop_timing(r) for r in read_rows(one)] == [drop_timing(r) for r in read_rows(many)]
    m1, m8 = load(one, "manifest.json"), load(many, "manifest.json")
    assert (m1["concurrency"], m8["concurrency"]) == (1, 8)
    assert drop_timing(m1) == drop_timing(m8)


def test_interrupted_run_counts_unfinished_episodes_in_coverage(tmp_path: Path) -> None:
    def scenario(arm: str, task: TaskSpec, trial: int) -> Scenario:
        return "unfinished" if (task.task_id, trial) == ("ctl-ok", 1) else "success"

    d = write_run(tmp_path / "run", make_plan(["a"]), scenario)
    build_artifacts(d, attest=attestations)
    a = load(d, "metrics.json")["arms"]["a"]
    assert (a["n_episodes"], a["n_eligible"], a["failure_counts"]["unknown"]) == (12, 11, 1)
    assert a["coverage"] == pytest.approx(11 / 12)
    assert a["pass_at_k"]["eligible_tasks"] == 3 and a["pass_at_k"]["coverage"] == 0.75


def test_manifest_records_versions_provider_chain_and_environment(run: Path) -> None:
    m = load(run, "manifest.json")
    plan = make_plan()
    assert m["provider"] == {
        "name": "synthetic",
        "version": "0.1",
        "distribution": "effectbench-tests",
    }
    assert m["pack_fingerprint"] == plan.pack_fingerprint and m["plan_hash"] == plan.plan_hash
    assert set(m["versions"]) == {"package", "spec", "scoring", "events_schema"}
    assert [t["task_id"] for t in m["tasks"]] == [t.task_id for t in TASKS]
    assert all(len(t["effect_hash"]) == 64 for t in m["tasks"])
    assert m["trials"] == 3 and m["z"] == 1.959963984540054 and m["concurrency"] == 1
    lines = (run / "events.jsonl").read_bytes().splitlines()
    assert m["log"]["events"] == len(lines)
    assert m["log"]["final_hash"] == orjson.loads(lines[-1])["h"]
    assert m["python"]["version"] and m["platform"]["system"]
    assert "orjson" in m["dependencies"] and "jinja2" in m["dependencies"]
    # no audit evidence in an ordinary run: the attestation is absent, never assumed
    assert m["attestations"]["adversarially_audited"] is None


def test_rows_round_trip_to_records(run: Path) -> None:
    for row in read_rows(run):
        rec = record_from_row(row)
        assert rec.episode_id == row["episode_id"] and rec.eligible == row["eligible"]


def test_missing_log_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="no events.jsonl"):
        build_artifacts(tmp_path, attest=attestations)


def test_corrupt_log_is_an_artifact_error_not_a_traceback(run: Path) -> None:
    log = run / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3].replace(b'"ep"', b'"eP"', 1)
    log.write_bytes(b"".join(lines))
    with pytest.raises(ArtifactError, match="line 4"):
        build_artifacts(run, attest=attestations)


def test_unused_trial_params_are_the_plan_ones() -> None:
    # the synthetic log uses the same payload derivation as the scheduler
    spec = next(iter(episodes(make_plan())))
    assert spec.params == trial_params(spec.task, spec.trial)
