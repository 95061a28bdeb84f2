"""The episode projection over synthetic logs built from the real typed events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from episode_log import GOOD_ROW, Log, _snap, rows

from effectbench.core.events import (
    EpisodeAbandoned,
    EpisodeFailed,
    EpisodeFinished,
    EpisodeProvisioned,
    PostRead,
    PreSnapshot,
    Reported,
    RunFinished,
    RunStarted,
)
from effectbench.core.model import (
    FailureClass,
    Outcome,
    Snapshot,
    SwerVariant,
    TrueState,
)
from effectbench.log.reader import LoggedEvent
from effectbench.projections.episodes import ProjectionError, fold_episode, project_episodes


def test_finished_success() -> None:
    log = Log()
    log.run("screen_only::mockmed::ok::t0", rows(GOOD_ROW))
    rec = fold_episode(log.events)
    assert rec.episode_id == "screen_only::mockmed::ok::t0"
    assert (rec.arm, rec.task_id, rec.trial) == ("screen_only", "mockmed::ok", 0)
    assert (rec.true_state, rec.outcome, rec.swer_variant) == (
        TrueState.CORRECT,
        Outcome.SUCCESS,
        None,
    )
    assert rec.eligible and rec.failure_class is None
    assert (rec.observed_count, rec.expected_count) == (1, 1)
    assert (rec.reported_success, rec.halted) == (True, False)
    t = rec.telemetry
    assert (t.setup_ms, t.wall_ms, t.model_calls, t.input_tokens, t.output_tokens, t.actions) == (
        12.5,
        40.0,
        3,
        100,
        20,
        1,
    )
    assert t.cost_usd is None
    assert rec.evidence == {
        "planned": "events.jsonl#0",
        "pre_snapshot": "events.jsonl#2",
        "reported": "events.jsonl#6",
        "post_read": "events.jsonl#7",
        "terminal": "events.jsonl#8",
    }


def test_param_refs_in_the_planned_effect_are_resolved_from_planned_params() -> None:
    log = Log()
    log.run("a::t::t0", rows({**GOOD_ROW, "note": "triage note othertrial"}))
    rec = fold_episode(log.events)
    assert rec.outcome is Outcome.SILENT_WRONG_EFFECT
    assert rec.swer_variant is SwerVariant.WRONG_WRITE


def test_phantom_and_safe_halt_use_planned_correct_action_available() -> None:
    log = Log()
    log.run("a::x::t0", rows())
    log.run("a::y::t0", rows(), reported=False, ca=False)
    log.run("a::z::t0", rows(), reported=False, ca=True)
    out = {r.episode_id: r for r in project_episodes(log.events)}
    assert out["a::x::t0"].swer_variant is SwerVariant.PHANTOM
    assert out["a::y::t0"].outcome is Outcome.SAFE_HALT
    assert out["a::z::t0"].outcome is Outcome.OVER_HALT


def test_missing_telemetry_is_none_not_zero() -> None:
    log = Log()
    log.run("a::t::t0", rows(GOOD_ROW), telemetry=False)
    t = fold_episode(log.events).telemetry
    assert (t.model_calls, t.input_tokens, t.actions, t.cost_usd) == (None, None, None, None)
    assert t.wall_ms == 40.0


def test_finished_with_unreadable_post_is_an_evaluation_failure() -> None:
    log = Log()
    log.run("a::t::t0", Snapshot.unreadable("database is locked"))
    rec = fold_episode(log.events)
    assert rec.true_state is TrueState.UNREADABLE
    assert rec.outcome is None and not rec.eligible
    assert rec.failure_class is FailureClass.EVALUATION
    assert any("database is locked" in r for r in rec.verdict_reasons)
    assert any("not scoreable" in r for r in rec.verdict_reasons)


def test_last_post_read_wins_on_re_read() -> None:
    log = Log()
    ep = "a::t::t0"
    log.planned(ep)
    log.attempt(ep, Snapshot.unreadable("busy"))
    log.add(ep, PostRead(attempt=1, snapshot=_snap(rows(GOOD_ROW))))
    log.add(ep, EpisodeFinished())
    rec = fold_episode(log.events)
    assert rec.outcome is Outcome.SUCCESS
    assert rec.evidence["post_read"] == "events.jsonl#8"


def test_failed_agent() -> None:
    log = Log()
    ep = "a::t::t0"
    log.planned(ep)
    log.add(ep, EpisodeProvisioned(setup_ms=3.0))
    log.add(
        ep,
        EpisodeFailed(
            failure_class=FailureClass.AGENT, stage="arm", error="arm raised RuntimeError"
        ),
    )
    rec = fold_episode(log.events)
    assert rec.outcome is None and rec.true_state is None and not rec.eligible
    assert rec.failure_class is FailureClass.AGENT
    assert rec.verdict_reasons == ("failed at arm: arm raised RuntimeError",)
    assert rec.telemetry.setup_ms == 3.0 and rec.telemetry.wall_ms is None
    assert rec.reported_success is None
    assert set(rec.evidence) == {"planned", "terminal"}


def test_abandoned_attempt_is_discarded_and_rerun_is_scored() -> None:
    log = Log()
    ep = "a::t::t0"
    log.planned(ep)
    log.attempt(ep, rows(GOOD_ROW, {**GOOD_ROW, "id": 2}))  # a doomed first attempt, no terminal
    log.add(None, RunStarted(run_id="r", plan={}, plan_hash="h", versions={}))
    log.add(ep, EpisodeAbandoned(reason="resumed"))
    log.add(ep, EpisodeProvisioned(setup_ms=7.0))
    log.add(ep, PreSnapshot(attempt=0, snapshot=_snap(rows())))
    log.add(ep, Reported(reported_success=True, halted=False, message="", wall_ms=5.0))
    log.add(ep, PostRead(attempt=0, snapshot=_snap(rows(GOOD_ROW))))
    log.add(ep, EpisodeFinished())
    rec = fold_episode(log.of(ep))
    assert rec.outcome is Outcome.SUCCESS
    assert rec.telemetry.setup_ms == 7.0
    assert rec.telemetry.model_calls is None  # the abandoned attempt's telemetry does not leak
    assert rec.evidence["pre_snapshot"] == "events.jsonl#11"  # the rerun's own pre-snapshot
    assert rec.evidence["planned"] == "events.jsonl#0"


def test_abandoned_attempt_without_pre_snapshot_cannot_use_collateral_check() -> None:
    # the rerun has no pre-snapshot and collateral loss is on: the judge cannot decide
    log = Log()
    ep = "a::t::t0"
    log.planned(ep)
    log.add(ep, EpisodeAbandoned(reason="resumed"))
    log.add(ep, Reported(reported_success=True, halted=False, message="", wall_ms=5.0))
    log.add(ep, PostRead(attempt=0, snapshot=_snap(rows(GOOD_ROW))))
    log.add(ep, EpisodeFinished())
    rec = fold_episode(log.events)
    assert rec.true_state is TrueState.UNREADABLE and rec.failure_class is FailureClass.EVALUATION


def test_interleaved_episodes_stream_in_terminal_order() -> None:
    log = Log()
    a, b = "a::t::t0", "a::t::t1"
    log.planned(a)
    log.planned(b)
    log.attempt(b, rows(GOOD_ROW))
    log.attempt(a, rows())
    log.add(b, EpisodeFinished())
    log.add(a, EpisodeFinished())
    log.add(None, RunFinished(interrupted=False, episodes_finished=2, episodes_failed=0))
    out = list(project_episodes(log.events))
    assert [r.episode_id for r in out] == [b, a]
    assert out[0].outcome is Outcome.SUCCESS
    assert out[1].swer_variant is SwerVariant.PHANTOM
    # folding each episode alone gives the same records
    assert out == [fold_episode(log.of(b)), fold_episode(log.of(a))]


def test_never_terminated_episode_is_yielded_at_end_as_unknown() -> None:
    log = Log()
    log.run("a::t::t0", rows(GOOD_ROW))
    log.planned("a::t::t1")
    log.attempt("a::t::t1", rows(GOOD_ROW))
    out = list(project_episodes(log.events))
    assert [r.episode_id for r in out] == ["a::t::t0", "a::t::t1"]
    last = out[1]
    assert last.failure_class is FailureClass.UNKNOWN and not last.eligible and last.outcome is None
    assert last.verdict_reasons == ("did not finish (run interrupted)",)
    assert "terminal" not in last.evidence


def test_records_are_yielded_as_soon_as_the_terminal_arrives() -> None:
    log = Log()
    log.run("a::t::t0", rows(GOOD_ROW))
    log.planned("a::t::t1")

    def stream() -> Iterator[LoggedEvent]:
        yield from log.events
        raise AssertionError("read past what was needed")

    it = project_episodes(stream())
    assert next(it).episode_id == "a::t::t0"


def test_last_terminal_wins_within_one_episode() -> None:
    log = Log()
    log.run("a::t::t0", rows(GOOD_ROW))
    log.add(
        "a::t::t0",
        EpisodeFailed(failure_class=FailureClass.ENVIRONMENT, stage="teardown", error="x"),
    )
    rec = fold_episode(log.events)
    assert (
        rec.failure_class is FailureClass.ENVIRONMENT
        and rec.evidence["terminal"] == "events.jsonl#9"
    )


def test_stream_refuses_an_event_after_the_terminal() -> None:
    log = Log()
    log.run("a::t::t0", rows(GOOD_ROW))
    log.add("a::t::t0", EpisodeFailed(failure_class=FailureClass.ENVIRONMENT, stage="x", error="x"))
    it = project_episodes(log.events)
    assert next(it).outcome is Outcome.SUCCESS
    with pytest.raises(ProjectionError, match="no episode.planned before it"):
        next(it)


def test_stream_yields_a_full_second_run_again_later_one_wins() -> None:
    log = Log()
    log.run("a::t::t0", rows())
    log.run("a::t::t0", rows(GOOD_ROW))
    out = list(project_episodes(log.events))
    assert [r.outcome for r in out] == [Outcome.SILENT_WRONG_EFFECT, Outcome.SUCCESS]
    assert {r.episode_id: r for r in out}["a::t::t0"].outcome is Outcome.SUCCESS


def test_malformed_logged_data_degrades_to_evaluation_failures() -> None:
    log = Log()
    ep = "a::t::t0"
    log.run(ep, rows(GOOD_ROW))
    post = log.events[7]
    log.events[7] = LoggedEvent(
        post.seq, post.type, post.ts, ep, {"attempt": 0, "snapshot": [1]}, post.line_no
    )
    assert fold_episode(log.events).failure_class is FailureClass.EVALUATION
    planned = log.events[0]
    log.events[0] = LoggedEvent(
        0, planned.type, 0.0, ep, {**planned.data, "effect": {"nope": 1}}, 1
    )
    rec = fold_episode(log.events)
    assert rec.failure_class is FailureClass.EVALUATION
    assert "is invalid" in rec.verdict_reasons[0]


@pytest.mark.parametrize(
    "snapshot",
    [
        {"readable": True, "tables": {"encounters": [1]}},
        {"readable": True, "tables": {"encounters": "ab"}},
        {"readable": True, "tables": [["encounters", []]]},
        {"readable": "false", "tables": {}},
    ],
)
def test_malformed_logged_rows_make_the_episode_unreadable_not_a_crash(
    snapshot: dict[str, Any],
) -> None:
    """A logged post_read whose rows the judge cannot read is an evaluation failure; a
    string "false" is not taken as readable."""
    log = Log()
    ep = "a::t::t0"
    log.run(ep, rows(GOOD_ROW))
    post = log.events[7]
    log.events[7] = LoggedEvent(
        post.seq, post.type, post.ts, ep, {"attempt": 0, "snapshot": snapshot}, post.line_no
    )
    rec = fold_episode(log.events)
    assert (rec.failure_class, rec.true_state) == (FailureClass.EVALUATION, TrueState.UNREADABLE)
    assert "malformed snapshot in event #7" in rec.verdict_reasons[0]


def test_planned_event_with_bad_category_is_a_projection_error() -> None:
    log = Log()
    log.planned("a::t::t0", category="C9_unknown")
    with pytest.raises(ProjectionError, match="bad field"):
        fold_episode(log.events)


@pytest.mark.parametrize("trial", ["0", True, -1, 1.0, None])
def test_a_planned_trial_that_is_no_count_is_a_projection_error(trial: object) -> None:
    """A re-chained log whose trial is "0" folded into a record and crashed the metrics
    (a TypeError comparing int and str, an internal error in verify): refused here."""
    log = Log()
    log.planned("a::t::t0")
    planned = log.events[0]
    log.events[0] = type(planned)(
        planned.seq, planned.type, planned.ts, planned.ep,
        {**planned.data, "trial": trial}, planned.line_no,
    )  # fmt: skip
    with pytest.raises(ProjectionError, match="trial must be an integer >= 0"):
        fold_episode(log.events)


def test_fold_rejects_mixed_or_empty_input() -> None:
    log = Log()
    log.planned("a::t::t0")
    log.planned("a::t::t1")
    with pytest.raises(ProjectionError):
        fold_episode(log.events)
    with pytest.raises(ProjectionError):
        fold_episode([])


def test_stream_memory_holds_only_in_flight_episodes() -> None:
    """Many finished episodes: each record comes out before the next episode starts."""
    log = Log()
    for i in range(200):
        log.run(f"a::t::t{i}", rows(GOOD_ROW))
    seen = 0
    pending_at_yield = []
    it = iter(log.events)
    consumed = 0

    def counted() -> Iterator[LoggedEvent]:
        nonlocal consumed
        for e in it:
            consumed += 1
            yield e

    for rec in project_episodes(counted()):
        seen += 1
        pending_at_yield.append(consumed)
        assert rec.outcome is Outcome.SUCCESS
    assert seen == 200
    assert pending_at_yield == [9 * (i + 1) for i in range(200)]


def test_rerun_that_plans_again_after_abandon() -> None:
    """The scheduler re-emits episode.planned when it reruns an abandoned episode."""
    log = Log()
    ep = "a::t::t0"
    log.planned(ep)
    log.attempt(ep, rows())
    log.add(ep, EpisodeAbandoned(reason="resumed"))
    log.planned(ep)
    log.attempt(ep, rows(GOOD_ROW), telemetry=False)
    log.add(ep, EpisodeFinished())
    (rec,) = project_episodes(log.events)
    assert rec.outcome is Outcome.SUCCESS
    assert rec.evidence["planned"] == "events.jsonl#9"
    assert rec.telemetry.model_calls is None


def test_a_new_planned_event_starts_a_fresh_attempt() -> None:
    log = Log()
    ep = "a::t::t0"
    log.planned(ep)
    log.attempt(ep, rows(GOOD_ROW))
    log.planned(ep)  # no abandoned marker: still nothing of the old attempt may leak
    log.add(ep, EpisodeFinished())
    rec = fold_episode(log.events)
    assert rec.failure_class is FailureClass.EVALUATION
    assert rec.verdict_reasons == ("finished without a readable agent report",)
