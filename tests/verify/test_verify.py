"""The verifier accepts an untouched run and rejects every tamper, naming it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from synthetic_run import read_rows, write_run

from effectbench.audit.attest import attestations
from effectbench.outputs.artifacts import build_artifacts, dump_json
from effectbench.verify.run_check import export_submission, verify_run, verify_submission


@pytest.fixture
def run(tmp_path: Path) -> Path:
    d = write_run(tmp_path / "run")
    build_artifacts(d, attest=attestations)
    return d


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def edit_json(path: Path, change: Callable[[Any], None]) -> None:
    doc = orjson.loads(path.read_bytes())
    change(doc)
    path.write_bytes(dump_json(doc))


def reasons_of(run: Path) -> list[str]:
    report = verify_run(run)
    assert not report.ok
    assert report.reasons
    return report.reasons


def test_untouched_run_verifies(run: Path) -> None:
    report = verify_run(run)
    assert report.reasons == [] and report.ok
    assert not [p.name for p in run.iterdir() if p.name.startswith(".verify-")]


def test_outcome_label_edited_in_results_is_rejected(run: Path) -> None:
    path = run / "results.jsonl"
    rows = lines(path)
    i = next(n for n, r in enumerate(rows) if b'"outcome":"SILENT_WRONG_EFFECT"' in r)
    rows[i] = rows[i].replace(b'"outcome":"SILENT_WRONG_EFFECT"', b'"outcome":"SUCCESS"')
    path.write_bytes(b"".join(rows))
    reasons = reasons_of(run)
    assert any(
        f"results.jsonl: line {i + 1}" in r
        and "outcome 'SUCCESS' but the log re-derives 'SILENT_WRONG_EFFECT'" in r
        for r in reasons
    ), reasons
    # the metrics no longer follow from the edited rows either
    assert any(r.startswith("metrics.json vs results.jsonl") for r in reasons)


def test_claimed_metric_edited_in_metrics_is_rejected(run: Path) -> None:
    def change(doc: Any) -> None:
        doc["arms"]["screen_only"]["swer"]["numerator"] = 0

    edit_json(run / "metrics.json", change)
    reasons = reasons_of(run)
    assert any(
        "metrics.json: arms.screen_only.swer.numerator claimed 0, recomputed 7" in r
        for r in reasons
    ), reasons


def test_float_metric_edit_beyond_tolerance_is_rejected(run: Path) -> None:
    def change(doc: Any) -> None:
        doc["arms"]["effect_verified"]["task_success"]["ci95"][0] += 1e-6

    edit_json(run / "metrics.json", change)
    assert any("task_success.ci95[0]" in r for r in reasons_of(run))


def test_one_event_data_edited_is_rejected(run: Path) -> None:
    path = run / "events.jsonl"
    rows = lines(path)
    # turn a wrong write into a correct one in the oracle's post-read: the chain must catch it
    i = next(n for n, r in enumerate(rows) if b'"episode.post_read"' in r and b'"draft"' in r)
    rows[i] = rows[i].replace(b'"draft"', b'"final"')
    path.write_bytes(b"".join(rows))
    reasons = reasons_of(run)
    assert any(
        r.startswith("events.jsonl: hash chain check failed") and f"line {i + 1}" in r
        for r in reasons
    ), reasons
    # and the labels re-derived from the edited data no longer match the stored rows
    assert any("results.jsonl" in r and "re-derives" in r for r in reasons), reasons


def test_a_deleted_line_is_rejected(run: Path) -> None:
    path = run / "events.jsonl"
    rows = lines(path)
    del rows[10]
    path.write_bytes(b"".join(rows))
    reasons = reasons_of(run)
    assert any("hash chain check failed: line 11" in r for r in reasons), reasons


def test_the_deleted_last_line_is_caught_by_the_manifest(run: Path) -> None:
    path = run / "events.jsonl"
    path.write_bytes(b"".join(lines(path)[:-1]))
    reasons = reasons_of(run)
    assert any("hash chain check failed" in r and "were recorded" in r for r in reasons), reasons


def test_two_swapped_lines_are_rejected(run: Path) -> None:
    path = run / "events.jsonl"
    rows = lines(path)
    rows[20], rows[21] = rows[21], rows[20]
    path.write_bytes(b"".join(rows))
    reasons = reasons_of(run)
    assert any("hash chain check failed: line 21" in r for r in reasons), reasons


def test_manifest_fingerprint_edit_is_rejected(run: Path) -> None:
    def change(doc: Any) -> None:
        doc["pack_fingerprint"] = "0" * 64

    edit_json(run / "manifest.json", change)
    assert any(r.startswith("manifest.json: pack_fingerprint") for r in reasons_of(run))


def test_summary_edit_is_rejected(run: Path) -> None:
    path = run / "summary.md"
    path.write_text(path.read_text().replace("| screen_only | 11/12", "| screen_only | 12/12", 1))
    assert any(r.startswith("summary.md: differs") for r in reasons_of(run))


def test_every_reason_is_listed(run: Path) -> None:
    def change(doc: Any) -> None:
        doc["arms"]["screen_only"]["over_halt"]["numerator"] = 5
        doc["arms"]["effect_verified"]["n_eligible"] = 12

    edit_json(run / "metrics.json", change)
    (run / "summary.md").write_text("fine, trust me\n")
    reasons = reasons_of(run)
    assert any("over_halt.numerator" in r for r in reasons)
    assert any("effect_verified.n_eligible" in r for r in reasons)
    assert any(r.startswith("summary.md") for r in reasons)


def test_missing_artifacts_are_reasons_not_crashes(run: Path) -> None:
    (run / "metrics.json").unlink()
    (run / "results.jsonl").unlink()
    reasons = reasons_of(run)
    assert "metrics.json: missing" in reasons and "results.jsonl: missing" in reasons


def test_not_a_run_directory(tmp_path: Path) -> None:
    report = verify_run(tmp_path)
    assert not report.ok and "no events.jsonl" in report.reasons[0]


# --------------------------------------------------------------------------- submissions


@pytest.fixture
def submission(run: Path, tmp_path: Path) -> Path:
    return export_submission(run, "screen_only", tmp_path / "submission.json")


def edit_submission(path: Path, change: Callable[[Any], None]) -> list[str]:
    edit_json(path, change)
    report = verify_submission(path)
    assert not report.ok
    return report.reasons


def test_exported_submission_verifies(submission: Path, run: Path) -> None:
    report = verify_submission(submission)
    assert report.reasons == [] and report.ok
    doc = orjson.loads(submission.read_bytes())
    metrics = orjson.loads((run / "metrics.json").read_bytes())
    assert doc["claimed"] == metrics["arms"]["screen_only"]
    assert len(doc["rows"]) == 12 and doc["rows"][0]["pre_snapshot"]["readable"] is True


def test_expected_pack_fingerprint_is_enforced(submission: Path) -> None:
    report = verify_submission(submission, expected_pack_fingerprint="f" * 64)
    assert not report.ok and "is not the expected" in report.reasons[0]


def test_system_that_matches_no_rows_is_rejected(submission: Path) -> None:
    def change(doc: Any) -> None:
        doc["system"] = "my_agent"

    reasons = edit_submission(submission, change)
    assert any(
        "system 'my_agent' matches no rows (rows name: screen_only)" in r for r in reasons
    ), reasons


def test_empty_rows_are_rejected(submission: Path) -> None:
    def change(doc: Any) -> None:
        doc["rows"] = []

    assert any("rows is empty" in r for r in edit_submission(submission, change))


def test_label_edited_to_success_is_rejected(submission: Path) -> None:
    def change(doc: Any) -> None:
        for row in doc["rows"]:
            if row["outcome"] == "SILENT_WRONG_EFFECT":
                row["outcome"] = "SUCCESS"
                row["swer_variant"] = None
                row["true_state"] = "CORRECT"
                return

    reasons = edit_submission(submission, change)
    assert any(
        "outcome claimed 'SUCCESS', re-derived 'SILENT_WRONG_EFFECT'" in r for r in reasons
    ), reasons


def test_relabelled_claims_do_not_survive_recomputation(submission: Path) -> None:
    def change(doc: Any) -> None:
        doc["claimed"]["swer"]["numerator"] = 1
        doc["claimed"]["swer"]["rate"] = 1 / 11

    reasons = edit_submission(submission, change)
    assert any("claimed.swer.numerator claimed 1, recomputed 7" in r for r in reasons), reasons
    assert any("claimed.swer.rate" in r for r in reasons)


def test_oracle_reading_edited_changes_the_rederived_label(submission: Path) -> None:
    def change(doc: Any) -> None:
        row = next(r for r in doc["rows"] if r["outcome"] == "SUCCESS")
        row["post_snapshot"]["tables"]["notes"] = []

    reasons = edit_submission(submission, change)
    assert any("re-derived 'SILENT_WRONG_EFFECT'" in r for r in reasons), reasons


def test_declared_trials_that_do_not_reproduce_the_payload_are_rejected(submission: Path) -> None:
    def change(doc: Any) -> None:
        doc["rows"][0]["trial"] = 2  # its params carry trial 0's tag
        doc["rows"][2]["trial"] = 0

    reasons = edit_submission(submission, change)
    assert any("params carry no trial tag" in r and "do not reproduce" in r for r in reasons), (
        reasons
    )


def test_trials_outside_the_declared_range_are_rejected(submission: Path) -> None:
    def change(doc: Any) -> None:
        doc["reproducibility"]["trials"] = 2

    reasons = edit_submission(submission, change)
    assert any("outside the declared trials 0..1" in r for r in reasons), reasons


def test_submission_pack_must_match_its_tasks(submission: Path) -> None:
    def change(doc: Any) -> None:
        doc["tasks"][0]["goal"] = "Something else entirely."

    assert any("pack_fingerprint" in r for r in edit_submission(submission, change))


def test_not_json_is_a_reason(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text("{not json")
    report = verify_submission(p)
    assert not report.ok and "not valid JSON" in report.reasons[0]


def test_export_refuses_an_unknown_system(run: Path, tmp_path: Path) -> None:
    from effectbench.outputs.artifacts import ArtifactError

    with pytest.raises(ArtifactError, match="not an arm"):
        export_submission(run, "nobody", tmp_path / "x.json")


# --------------------------------------------------------------------------- forgeries that keep
# every claim consistent (the reference verifier's weaknesses and their relatives)


def consistent_claims(doc: Any) -> None:
    """Recompute ``claimed`` from the rows' own labels, as a forger would."""
    from effectbench.outputs.artifacts import record_from_row
    from effectbench.projections.metrics import MetricsAccumulator, PlanIndex, TaskAxes

    index = PlanIndex(
        [doc["system"]],
        [TaskAxes(t["task_id"], t["category"], t["substrate"], t["split"]) for t in doc["tasks"]],
        doc["reproducibility"]["trials"],
    )
    acc = MetricsAccumulator(index)
    for row in doc["rows"]:
        if row.get("system") == doc["system"]:
            acc.add(record_from_row({**row, "arm": row["system"]}))
    doc["claimed"] = acc.arm_metrics(0)


def test_dropped_rows_with_consistent_claims_are_rejected(submission: Path) -> None:
    def change(doc: Any) -> None:
        doc["rows"] = [r for r in doc["rows"] if r["outcome"] != "SILENT_WRONG_EFFECT"]
        consistent_claims(doc)
        assert doc["claimed"]["swer"]["numerator"] == 0

    reasons = edit_submission(submission, change)
    assert any("no row for (c1-save, trial 0)" in r for r in reasons), reasons
    assert not any("claimed." in r for r in reasons), reasons  # the claims themselves agree


def test_rows_of_another_system_are_rejected(submission: Path) -> None:
    def change(doc: Any) -> None:
        extra = dict(doc["rows"][0], system="someone_else")
        doc["rows"].append(extra)

    reasons = edit_submission(submission, change)
    assert any("row 12 is not a row of system 'screen_only'" in r for r in reasons), reasons


def test_a_declared_seed_rule_the_verifier_does_not_reproduce_is_rejected(
    submission: Path,
) -> None:
    def change(doc: Any) -> None:
        doc["reproducibility"]["seed_rule"] = "seeds [1, 2, 3]"

    reasons = edit_submission(submission, change)
    assert any("seed_rule 'seeds [1, 2, 3]' is not the rule" in r for r in reasons), reasons


def rewrite_log(run: Path, change: Callable[[list[Any]], list[Any]]) -> None:
    """Rewrite events.jsonl with a fresh, valid chain and rebuild every artifact from it."""
    from effectbench.log.reader import read_log, write_events_sync

    entries = [(e.type, dict(e.data), e.ep) for e in read_log(run / "events.jsonl")]
    (run / "events.jsonl").unlink()
    write_events_sync(run / "events.jsonl", change(entries), ts=1_700_000_000.0)
    build_artifacts(run, attest=attestations)


def retried(entries: list[Any], ep: str, new_ep: str) -> list[Any]:
    """Append a second attempt of ``ep`` (under ``new_ep``) whose post-read shows the effect."""
    import copy

    again = []
    for type_, data, e in entries:
        if e != ep:
            continue
        data = copy.deepcopy(data)
        if type_ == "episode.post_read":
            for row in data["snapshot"]["tables"]["notes"]:
                row["status"] = "final"
        again.append((type_, data, new_ep))
    return entries[:-1] + again + entries[-1:]


def test_a_rerun_of_a_terminated_episode_is_rejected(run: Path) -> None:
    ep = "screen_only::c1-save::t0"
    rewrite_log(run, lambda entries: retried(entries, ep, ep))
    row = next(r for r in read_rows(run) if r["episode_id"] == ep)
    assert row["outcome"] == "SUCCESS"  # the hidden retry replaced the silent wrong effect
    reasons = reasons_of(run)
    assert any(f"plans episode {ep} again after it terminated" in r for r in reasons), reasons


def test_a_second_id_for_one_planned_episode_is_rejected(run: Path) -> None:
    ep = "screen_only::c1-save::t0"
    rewrite_log(run, lambda entries: retried(entries, ep, ep + "-retry"))
    reasons = reasons_of(run)
    assert any(f"under the id '{ep}-retry', not '{ep}'" in r for r in reasons), reasons


def test_export_never_overwrites_a_file(run: Path, tmp_path: Path) -> None:
    from effectbench.outputs.artifacts import ArtifactError

    target = tmp_path / "taken.json"
    target.write_text("someone's submission\n")
    with pytest.raises(ArtifactError, match="already exists"):
        export_submission(run, "screen_only", target)
    assert target.read_text() == "someone's submission\n"


def test_a_manifest_that_is_not_an_object_is_rejected(run: Path) -> None:
    # A truncated log, rebuilt artifacts, and a manifest that no longer states the final hash.
    path = run / "events.jsonl"
    path.write_bytes(b"".join(lines(path)[:-1]))
    build_artifacts(run, attest=attestations)
    (run / "manifest.json").write_bytes(b"[]\n")
    reasons = reasons_of(run)
    assert any("manifest.json: is not a JSON object (got list)" in r for r in reasons), reasons
