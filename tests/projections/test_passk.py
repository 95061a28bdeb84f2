"""The pass@k family against the worked vectors (copied from
shared/reference/metric_vectors.json), both directly and through the accumulator."""

from __future__ import annotations

from typing import Any

import pytest

from effectbench.core.model import FailureClass, Outcome
from effectbench.projections.metrics import MetricsAccumulator, PlanIndex, TaskAxes
from effectbench.projections.passk import (
    AttemptCost,
    attempt_success_rate,
    cost_to_first_success,
    first_success_attempt,
    prefix_metrics,
    unbiased_estimators,
    unbiased_ks,
)
from effectbench.scoring.records import EpisodeRecord, EpisodeTelemetry


def r6(block: dict[str, Any]) -> dict[str, Any]:
    out = dict(block)
    for key in ("value", "coverage"):
        if out.get(key) is not None:
            out[key] = round(out[key], 6)
    if out.get("ci95") is not None:
        out["ci95"] = [round(x, 6) for x in out["ci95"]]
    return out


def blk(
    s: int, e: int, t: int, cov: float, value: float | None, ci: list[float] | None, k: int
) -> dict[str, Any]:
    return {
        "k": k,
        "successes": s,
        "eligible_tasks": e,
        "total_tasks": t,
        "coverage": cov,
        "value": value,
        "ci95": ci,
    }


OBSERVED_PREFIX = [
    pytest.param(
        [[False, True, False], [True, True, True]],
        blk(1, 2, 2, 1.0, 0.5, [0.094531, 0.905469], 1),
        blk(2, 2, 2, 1.0, 1.0, [0.34238, 1.0], 3),
        blk(1, 2, 2, 1.0, 0.5, [0.094531, 0.905469], 3),
        id="baseline",
    ),
    pytest.param(
        [[True, True, True], [True, True, True]],
        blk(2, 2, 2, 1.0, 1.0, [0.34238, 1.0], 1),
        blk(2, 2, 2, 1.0, 1.0, [0.34238, 1.0], 3),
        blk(2, 2, 2, 1.0, 1.0, [0.34238, 1.0], 3),
        id="candidate",
    ),
    pytest.param(
        [[None, True, False], [True, True, True]],
        blk(1, 1, 2, 0.5, 1.0, [0.206549, 1.0], 1),
        blk(1, 1, 2, 0.5, 1.0, [0.206549, 1.0], 3),
        blk(1, 1, 2, 0.5, 1.0, [0.206549, 1.0], 3),
        id="negative-control-first-attempt-ineligible",
    ),
    pytest.param(
        # aiden's fixed-k test: a task with an ineligible first attempt, one all-eligible
        # task that succeeds once but not every time
        [[None, True, True], [True, False, True]],
        blk(1, 1, 2, 0.5, 1.0, [0.206549, 1.0], 1),
        blk(1, 1, 2, 0.5, 1.0, [0.206549, 1.0], 3),
        blk(0, 1, 2, 0.5, 0.0, [0.0, 0.793451], 3),
        id="fixed-k-eligibility",
    ),
]


@pytest.mark.parametrize(("attempts", "at1", "atk", "powk"), OBSERVED_PREFIX)
def test_observed_prefix_vectors(
    attempts: list[list[bool | None]],
    at1: dict[str, Any],
    atk: dict[str, Any],
    powk: dict[str, Any],
) -> None:
    got = prefix_metrics(attempts, 3)
    assert r6(got["pass_at_1"]) == at1
    assert r6(got["pass_at_k"]) == atk
    assert r6(got["pass_pow_k"]) == powk


def test_ineligible_first_attempt_is_not_a_failure() -> None:
    # Negative control: if the ineligible attempt counted as a failure, pass@1 would be 1/2.
    got = prefix_metrics([[None, True, False], [True, True, True]], 3)
    assert got["pass_at_1"]["value"] == 1.0
    assert got["pass_at_1"]["coverage"] == 0.5


def test_attempt_success_rate_vector() -> None:
    got = attempt_success_rate([[False, True, False], [True, True, True]])
    assert got["successes"] == 4 and got["eligible_attempts"] == 6
    assert round(got["value"], 6) == 0.666667
    assert [round(x, 6) for x in got["ci95"]] == [0.299993, 0.903229]


def test_pooled_attempt_rate_vectors() -> None:
    # per_task_estimators_unequal_n.pooled_attempt_rate: 12/20 over tasks of unequal n
    unequal = [[True] * c + [False] * (n - c) for n, c in ((5, 5), (5, 3), (3, 1), (4, 0), (3, 3))]
    got = attempt_success_rate(unequal)
    assert (got["successes"], got["eligible_attempts"]) == (12, 20)
    assert [round(x, 6) for x in got["ci95"]] == [0.386582, 0.781193]
    # clustered_se.wilson_pooled_trials_naive: 8/15, the interval the clustered one widens
    tasks = [[1, 1, 1], [0, 0, 0], [1, 0, 1], [1, 1, 0], [0, 0, 1]]
    got = attempt_success_rate([[bool(x) for x in t] for t in tasks])
    assert (got["successes"], got["eligible_attempts"]) == (8, 15)
    assert [round(x, 6) for x in got["ci95"]] == [0.30117, 0.751905]


def test_k_comes_from_the_plan_not_from_finished_attempts() -> None:
    # Only two of three planned attempts finished: the task leaves pass@3 instead of
    # being scored on a shorter k.
    got = prefix_metrics([[True, True], [False, False, False]], 3)
    assert got["pass_at_k"]["eligible_tasks"] == 1 and got["pass_at_k"]["value"] == 0.0


def test_per_task_estimators_unequal_n_vector() -> None:
    # Tasks A..E with (n, c) = (5,5) (5,3) (3,1) (4,0) (3,3): five planned trials each,
    # the missing ones ineligible.
    def task(n: int, c: int) -> list[bool | None]:
        return [True] * c + [False] * (n - c) + [None] * (5 - n)

    attempts = [task(5, 5), task(5, 3), task(3, 1), task(4, 0), task(3, 3)]
    got = unbiased_estimators(attempts, [2])
    hat = got["pass_hat_k"]["2"]
    at = got["pass_at_k_unbiased"]["2"]
    assert round(hat["value"], 6) == 0.46
    assert round(hat["se"], 6) == 0.227156
    assert [round(x, 6) for x in hat["ci95"]] == [0.014782, 0.905218]
    assert round(at["value"], 6) == 0.713333
    assert round(at["se"], 6) == 0.188444
    assert [round(x, 6) for x in at["ci95"]] == [0.34399, 1.0]
    assert hat["method"] == "task_level_clt"
    # The global-n pitfall (every task scored as if n = 5) gives 0.32; we must not.
    assert round(hat["value"], 2) != 0.32


def test_observed_vs_unbiased_contrast() -> None:
    attempts: list[list[bool | None]] = [[False, True, False], [True, True, True]]
    got = unbiased_estimators(attempts, [1, 2, 3])
    expect = {1: (0.666667, 0.666667), 2: (0.833333, 0.5), 3: (1.0, 0.5)}
    for k, (at, hat) in expect.items():
        assert round(got["pass_at_k_unbiased"][str(k)]["value"], 6) == at
        assert round(got["pass_hat_k"][str(k)]["value"], 6) == hat
    # at k = n the unbiased estimators equal the prefix ones
    prefix = prefix_metrics(attempts, 3)
    assert got["pass_at_k_unbiased"]["3"]["value"] == prefix["pass_at_k"]["value"]
    assert got["pass_hat_k"]["3"]["value"] == prefix["pass_pow_k"]["value"]


def test_unbiased_ks_respect_plan() -> None:
    assert unbiased_ks(10, 10) == (1, 2, 4, 8, 10)
    assert unbiased_ks(3, 3) == (1, 2, 3)
    assert unbiased_ks(1, 1) == (1,)


def test_cost_to_first_success_vector() -> None:
    a = ([False, True], [AttemptCost(100, 10, 0.1), AttemptCost(200, 20, 0.2)])
    b = ([True, False], [AttemptCost(400, 40, 0.4), AttemptCost(800, 80, 0.8)])
    got = cost_to_first_success([a, b])
    assert got["total_tokens"]["count"] == 2 and got["total_tokens"]["p50"] == 35.0
    assert got["cost_usd"]["count"] == 2 and round(got["cost_usd"]["p50"], 6) == 0.35
    assert got["task_wall_ms"]["count"] == 2 and got["task_wall_ms"]["p50"] == 350.0
    fsa = first_success_attempt([a[0], b[0]])
    assert (fsa["count"], fsa["mean"], fsa["p50"]) == (2, 1.5, 1.5)


def test_cost_to_first_success_missing_source_is_null_not_zero() -> None:
    got = cost_to_first_success(
        [([False, True], [AttemptCost(100, None, None), AttemptCost(200, 20, 0.2)])]
    )
    assert got["task_wall_ms"]["count"] == 1
    assert got["total_tokens"] == {"count": 0, "mean": None, "p50": None, "p90": None, "p95": None}


def test_cost_to_first_success_stops_at_an_ineligible_attempt() -> None:
    got = cost_to_first_success([([None, True], [AttemptCost(1, 1, 1), AttemptCost(2, 2, 2)])])
    assert got["task_wall_ms"]["count"] == 0


def _record(
    task: str, trial: int, outcome: Outcome | None, tokens: int | None = None
) -> EpisodeRecord:
    return EpisodeRecord(
        episode_id=f"arm::{task}::t{trial}",
        arm="arm",
        task_id=task,
        trial=trial,
        category="control",
        substrate="web",
        split="dev",
        reversible=False,
        effect_declared=True,
        correct_action_available=True,
        reported_success=None if outcome is None else outcome is Outcome.SUCCESS,
        halted=False,
        true_state=None,
        outcome=outcome,
        swer_variant=None,
        eligible=outcome is not None,
        failure_class=None if outcome is not None else FailureClass.ENVIRONMENT,
        telemetry=EpisodeTelemetry(
            wall_ms=100.0 * (trial + 1), input_tokens=tokens, output_tokens=tokens and 0
        ),
    )


def test_accumulator_feeds_passk_in_plan_order_whatever_the_arrival_order() -> None:
    plan = PlanIndex(
        ["arm"],
        [TaskAxes("upd", "control", "web", "dev"), TaskAxes("rec", "control", "web", "dev")],
        3,
    )
    S, F = Outcome.SUCCESS, Outcome.OVER_HALT
    recs = [
        _record("upd", 0, None),
        _record("upd", 1, S),
        _record("upd", 2, F),
        _record("rec", 0, S),
        _record("rec", 1, S),
        _record("rec", 2, S),
    ]
    doc1 = MetricsAccumulator(plan).add_all(recs).document("1.0.0")
    doc2 = MetricsAccumulator(plan).add_all(reversed(recs)).document("1.0.0")
    assert doc1 == doc2
    arm = doc1["arms"]["arm"]
    assert arm["k"] == 3
    assert r6(arm["pass_at_1"]) == blk(1, 1, 2, 0.5, 1.0, [0.206549, 1.0], 1)
    assert arm["first_success_attempt"]["count"] == 1  # "upd" broke its eligible prefix
    assert arm["telemetry"]["cost_to_first_success"]["task_wall_ms"]["p50"] == 100.0
