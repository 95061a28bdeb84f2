"""Arm-vs-arm comparisons, paired by (task, trial)."""

from __future__ import annotations

import pytest

from effectbench.core.model import FailureClass, TrueState
from effectbench.projections.compare import Pair, paired_difference
from effectbench.projections.metrics import MetricsAccumulator, PlanIndex, TaskAxes
from effectbench.scoring.classify import classify
from effectbench.scoring.records import EpisodeRecord

SUCCESS = (True, TrueState.CORRECT, True)
WRONG_WRITE = (True, TrueState.WRONG_PERSISTED, True)
PHANTOM = (True, TrueState.ABSENT, True)
OVER_HALT = (False, TrueState.ABSENT, True)
Kind = tuple[bool, TrueState, bool] | FailureClass


def record(arm: str, task: TaskAxes, trial: int, kind: Kind) -> EpisodeRecord:
    if isinstance(kind, FailureClass):
        reported, state, outcome, variant, eligible = None, None, None, None, False
    else:
        c = classify(*kind)
        reported, state, outcome, variant, eligible = (
            kind[0],
            kind[1],
            c.outcome,
            c.swer_variant,
            True,
        )
    return EpisodeRecord(
        episode_id=f"{arm}::{task.task_id}::t{trial}",
        arm=arm,
        task_id=task.task_id,
        trial=trial,
        category=task.category,
        substrate=task.substrate,
        split=task.split,
        reversible=False,
        effect_declared=True,
        correct_action_available=True,
        reported_success=reported,
        halted=None,
        true_state=state,
        outcome=outcome,
        swer_variant=variant,
        eligible=eligible,
        failure_class=None if eligible else kind,  # type: ignore[arg-type]
    )


def tasks_of(n: int) -> list[TaskAxes]:
    return [TaskAxes(f"t{i}", "control", "web", "dev") for i in range(n)]


def table(a: int, b: int, c: int, d: int) -> list[Pair]:
    return [(True, True)] * a + [(True, False)] * b + [(False, True)] * c + [(False, False)] * d


@pytest.mark.parametrize(
    ("a", "b", "c", "d", "lo", "hi"),
    [
        (30, 40, 5, 15, 0.256792, 0.500898),
        (1, 1, 7, 12, -0.50692, -0.025559),
        (59, 6, 16, 80, -0.118621, -0.004625),
        (14, 5, 0, 22, 0.011483, 0.226493),
    ],
)
def test_paired_difference_uses_newcombe_paired(
    a: int, b: int, c: int, d: int, lo: float, hi: float
) -> None:
    got = paired_difference([table(a, b, c, d)])
    assert [round(x, 6) for x in got["ci95"]] == [lo, hi]
    assert got["table"] == {"both": a, "first_only": b, "second_only": c, "neither": d}
    assert got["difference"] == pytest.approx((b - c) / (a + b + c + d))


@pytest.mark.parametrize(
    ("b", "c", "exact", "mid"),
    [
        (10, 2, 0.038574, 0.022461),
        (14, 0, 0.000122, 6.1e-05),
        (5, 5, 1.0, 1.0),
        (3, 1, 0.625, 0.375),
    ],
)
def test_mcnemar_on_discordant_pairs(b: int, c: int, exact: float, mid: float) -> None:
    got = paired_difference([table(7, b, c, 3)])["mcnemar"]
    assert (round(got["exact_p"], 6), round(got["mid_p"], 6)) == (exact, mid)


def test_task_clustered_interval_of_the_paired_difference() -> None:
    # Per task the first arm is worse on every trial of two tasks and equal elsewhere:
    # the clustered interval must be wider than the one that treats trials as independent.
    by_task = [
        table(0, 3, 0, 0),
        table(0, 3, 0, 0),
        table(3, 0, 0, 0),
        table(0, 0, 0, 3),
        table(0, 0, 0, 3),
    ]
    got = paired_difference(by_task)["task_clustered"]
    flat = paired_difference([[p] for t in by_task for p in t])["task_clustered"]
    assert got["mean"] == pytest.approx(0.4) == flat["mean"]
    assert got["se"] > flat["se"]
    assert got["n_clusters"] == 5 and got["method"] == "miller2024_clustered"


def test_no_pairs_gives_nulls() -> None:
    got = paired_difference([[], []])
    assert got["n_pairs"] == 0 and got["difference"] is None and got["ci95"] is None
    assert got["mcnemar"]["exact_p"] == 1.0


def test_comparisons_pair_arms_by_task_and_trial_in_plan_order() -> None:
    plan = PlanIndex(["screen_only", "effect_verified", "third"], tasks_of(3), 4)
    acc = MetricsAccumulator(plan)
    screen: list[Kind] = [SUCCESS, WRONG_WRITE, PHANTOM, SUCCESS] * 3
    verified: list[Kind] = [SUCCESS, OVER_HALT, OVER_HALT, FailureClass.ENVIRONMENT] * 3
    for arm, kinds in (("screen_only", screen), ("effect_verified", verified), ("third", verified)):
        slots = [(t, k) for t in plan.tasks for k in range(plan.trials)]
        for (task, trial), kind in zip(slots, kinds, strict=True):
            acc.add(record(arm, task, trial, kind))
    comps = acc.comparisons()
    assert [(c["first"], c["second"]) for c in comps] == [
        ("screen_only", "effect_verified"),
        ("screen_only", "third"),
        ("effect_verified", "third"),
    ]
    c = comps[0]
    assert c["pairs_planned"] == 12 and c["pairs_eligible"] == 9 and c["pair_coverage"] == 0.75
    assert c["swer"]["table"] == {"both": 0, "first_only": 6, "second_only": 0, "neither": 3}
    assert c["swer"]["difference"] == pytest.approx(6 / 9)
    assert c["task_success"]["table"] == {
        "both": 3,
        "first_only": 0,
        "second_only": 0,
        "neither": 6,
    }
    assert c["swer"]["mcnemar"]["b"] == 6 and c["swer"]["mcnemar"]["c"] == 0
    assert comps[2]["swer"]["difference"] == 0.0
    # the SWER gain of halting is visible beside it: over-halt, paired the same way
    assert c["over_halt"]["table"] == {"both": 0, "first_only": 0, "second_only": 6, "neither": 3}
    assert c["over_halt"]["difference"] == pytest.approx(-6 / 9)


def test_single_arm_has_no_comparisons() -> None:
    plan = PlanIndex(["a"], tasks_of(1), 1)
    assert MetricsAccumulator(plan).document("x")["comparisons"] == []
