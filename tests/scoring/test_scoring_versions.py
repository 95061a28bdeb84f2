"""A log is scored under the scoring version its run.started names: an old run rescores
as it was scored, and a diff (1.1) is no effect under 1.0.0."""

from __future__ import annotations

from typing import Any

from episode_log import EFFECT, GOOD_ROW, NOTE, Log, _snap, rows

from effectbench.core import versions
from effectbench.core.codec import converter
from effectbench.core.events import (
    EpisodeFinished,
    EpisodePlanned,
    ReferencePostRead,
    ReferencePreSnapshot,
    RunStarted,
)
from effectbench.core.hashing import content_hash
from effectbench.core.model import (
    AnyEffect,
    DiffEffect,
    FailureClass,
    Insert,
    Outcome,
    ParamRef,
    Snapshot,
    TrueState,
)
from effectbench.outputs.artifacts import scored_under
from effectbench.projections.episodes import project_episodes
from effectbench.scoring.records import EpisodeRecord

DIFF = DiffEffect(
    changes=(
        Insert("encounters", {"patient_id": "p1", "type": "Triage", "note": ParamRef("note")}),
    ),
    keys={"encounters": ("id",)},
)
REFERENCE = DiffEffect(keys={"encounters": ("id",)}, mode="reference", reference="oracle")


def _started(log: Log, scoring: str | None) -> None:
    named = {} if scoring is None else {"scoring": scoring}
    log.add(None, RunStarted(run_id="r", plan={}, plan_hash="x", versions=named))


def _planned(log: Log, ep: str, effect: AnyEffect) -> None:
    log.planned(ep)
    data: dict[str, Any] = dict(log.events[-1].data)
    data["effect"] = converter.unstructure(effect)
    data["effect_hash"] = content_hash(effect)
    log.events.pop()
    log.add(ep, EpisodePlanned(**data))


def _one(log: Log) -> EpisodeRecord:
    [rec] = project_episodes(log.events)
    return rec


def _run(
    scoring: str | None, effect: AnyEffect, post: Snapshot, ref: Snapshot | None = None
) -> EpisodeRecord:
    log = Log()
    _started(log, scoring)
    _planned(log, "a::mockmed::ok::t0", effect)
    log.attempt("a::mockmed::ok::t0", post)
    if ref is not None:
        empty = _snap(Snapshot(True, {"encounters": ()}))
        log.add("a::mockmed::ok::t0", ReferencePreSnapshot(arm="oracle", snapshot=empty))
        log.add(
            "a::mockmed::ok::t0",
            ReferencePostRead(arm="oracle", snapshot=_snap(ref), reported_success=True, message=""),
        )
    log.add("a::mockmed::ok::t0", EpisodeFinished())
    return _one(log)


def test_an_insert_effect_gets_the_same_labels_under_either_version() -> None:
    for post in (rows(GOOD_ROW), rows(), rows(GOOD_ROW, dict(GOOD_ROW, id=2))):
        old, new = _run("1.0.0", EFFECT, post), _run("1.1.0", EFFECT, post)
        assert (old.true_state, old.outcome, old.verdict_reasons) == (
            new.true_state,
            new.outcome,
            new.verdict_reasons,
        )


def test_a_diff_is_no_effect_under_1_0_0_and_is_judged_under_1_1_0() -> None:
    old = _run("1.0.0", DIFF, rows(GOOD_ROW))
    assert old.failure_class is FailureClass.EVALUATION and "1.0.0" in old.verdict_reasons[0]
    new = _run("1.1.0", DIFF, rows(GOOD_ROW))
    assert (new.true_state, new.outcome) == (TrueState.CORRECT, Outcome.SUCCESS)
    assert _run(None, DIFF, rows(GOOD_ROW)).true_state is TrueState.CORRECT  # current rules


def test_the_reference_reads_logged_in_the_episode_make_the_expected_diff() -> None:
    rec = _run("1.1.0", REFERENCE, rows(GOOD_ROW), ref=rows(GOOD_ROW))
    assert rec.true_state is TrueState.CORRECT, rec.verdict_reasons
    assert set(rec.evidence) >= {ReferencePreSnapshot.TYPE, ReferencePostRead.TYPE}
    wrong = _run("1.1.0", REFERENCE, rows(dict(GOOD_ROW, note="other")), ref=rows(GOOD_ROW))
    assert wrong.true_state is TrueState.WRONG_PERSISTED
    assert _run("1.1.0", REFERENCE, rows(GOOD_ROW)).failure_class is FailureClass.EVALUATION


def test_artifacts_name_the_version_the_log_was_scored_under() -> None:
    assert scored_under({"scoring": "1.0.0"}) == "1.0.0"
    assert scored_under({"scoring": "9.9.9"}) == versions.SCORING_VERSION
    assert scored_under({}) == versions.SCORING_VERSION
    assert NOTE in GOOD_ROW.values()
