"""Episode-level metrics as a projection over EpisodeRecords."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from effectbench.core.model import FailureClass, TrueState
from effectbench.projections.metrics import (
    METRICS_SCHEMA,
    TELEMETRY_FIELDS,
    MetricsAccumulator,
    MetricsError,
    PlanIndex,
    TaskAxes,
)
from effectbench.projections.passk import AttemptCost
from effectbench.scoring.classify import classify
from effectbench.scoring.records import EpisodeRecord, EpisodeTelemetry

RATE_KEYS = (
    "swer",
    "swer_wrong_write",
    "swer_phantom",
    "over_halt",
    "task_success",
    "screen_success",
)

# (reported_success, true_state, correct_action_available) for each label, or a failure class
SUCCESS = (True, TrueState.CORRECT, True)
WRONG_WRITE = (True, TrueState.WRONG_PERSISTED, True)
PHANTOM = (True, TrueState.ABSENT, True)
FALSE_ABORT = (False, TrueState.CORRECT, True)
WRONG_ACTION = (False, TrueState.WRONG_PERSISTED, True)
OVER_HALT = (False, TrueState.ABSENT, True)
SAFE_HALT = (False, TrueState.ABSENT, False)
Kind = tuple[bool, TrueState, bool] | FailureClass


def record(
    arm: str,
    task: TaskAxes,
    trial: int,
    kind: Kind,
    telemetry: EpisodeTelemetry | None = None,
) -> EpisodeRecord:
    common: dict[str, Any] = {
        "episode_id": f"{arm}::{task.task_id}::t{trial}",
        "arm": arm,
        "task_id": task.task_id,
        "trial": trial,
        "category": task.category,
        "substrate": task.substrate,
        "split": task.split,
        "reversible": False,
        "effect_declared": True,
        "telemetry": telemetry or EpisodeTelemetry(),
    }
    if isinstance(kind, FailureClass):
        return EpisodeRecord(
            **common,
            correct_action_available=True,
            reported_success=None,
            halted=None,
            true_state=None,
            outcome=None,
            swer_variant=None,
            eligible=False,
            failure_class=kind,
        )
    reported, state, available = kind
    c = classify(reported, state, available)
    return EpisodeRecord(
        **common,
        correct_action_available=available,
        reported_success=reported,
        halted=not reported,
        true_state=state,
        outcome=c.outcome,
        swer_variant=c.swer_variant,
        eligible=c.scoreable,
        failure_class=None,
    )


def tasks_of(n: int, category: str = "control", substrate: str = "web") -> list[TaskAxes]:
    return [TaskAxes(f"{category}-{substrate}-{i}", category, substrate, "dev") for i in range(n)]


def run(plan: PlanIndex, kinds: Sequence[Kind], arm: str | None = None) -> dict[str, Any]:
    """Feed one arm's episodes in plan order (task-major, then trial)."""
    arm = arm or plan.arms[0]
    acc = MetricsAccumulator(plan)
    slots = [(t, k) for t in plan.tasks for k in range(plan.trials)]
    for (task, trial), kind in zip(slots, kinds, strict=False):
        acc.add(record(arm, task, trial, kind))
    return acc.document("test")


def rate(block: dict[str, Any]) -> tuple[int, int, float | None, list[float] | None]:
    ci = block["ci95"]
    return (
        block["numerator"],
        block["denominator"],
        None if block["rate"] is None else round(block["rate"], 6),
        None if ci is None else [round(x, 6) for x in ci],
    )


def test_anchor_shaped_arm_headline() -> None:
    # 90 episodes: 36 SUCCESS, 40 wrong-write and 10 phantom SWER, 4 over-halt
    plan = PlanIndex(["screen_only"], tasks_of(9), 10)
    kinds: Sequence[Kind] = [SUCCESS] * 36 + [WRONG_WRITE] * 40 + [PHANTOM] * 10 + [OVER_HALT] * 4
    doc = run(plan, kinds)
    assert doc["schema"] == METRICS_SCHEMA and doc["scoring_version"] == "test"
    arm = doc["arms"]["screen_only"]
    assert rate(arm["swer"]) == (50, 90, 0.555556, [0.452719, 0.653843])
    assert rate(arm["swer_wrong_write"])[:2] == (40, 90)
    assert rate(arm["swer_phantom"])[:2] == (10, 90)
    assert rate(arm["over_halt"])[:2] == (4, 90)
    assert rate(arm["task_success"]) == (36, 90, 0.4, [0.30489, 0.503297])  # wilson(36, 90)
    assert rate(arm["screen_success"])[:2] == (86, 90)
    assert arm["n_episodes"] == 90 and arm["n_eligible"] == 90 and arm["coverage"] == 1.0
    assert arm["outcome_counts"] == {
        "success": 36,
        "silent_wrong_effect": 50,
        "false_abort": 0,
        "wrong_action": 0,
        "over_halt": 4,
        "safe_halt": 0,
    }
    assert arm["failure_counts"] == {
        "agent": 0,
        "environment": 0,
        "evaluation": 0,
        "skipped": 0,
        "unknown": 0,
    }


def test_gap_is_paired_within_the_arm_and_equals_swer() -> None:
    # Vector "gap with c=0": screen 90/90, effect 36/90.
    plan = PlanIndex(["a"], tasks_of(9), 10)
    doc = run(plan, [SUCCESS] * 36 + [WRONG_WRITE] * 54)
    gap = doc["arms"]["a"]["gap"]
    assert round(gap["value"], 6) == 0.6 == round(doc["arms"]["a"]["swer"]["rate"], 6)
    assert [round(x, 6) for x in gap["ci95"]] == [0.488888, 0.69511]
    assert gap["method"] == "newcombe_paired"


def test_ineligible_episodes_leave_the_denominator_and_show_in_coverage() -> None:
    plan = PlanIndex(["a"], tasks_of(2), 5)
    kinds: list[Kind] = [
        SUCCESS,
        PHANTOM,
        FailureClass.ENVIRONMENT,
        FailureClass.EVALUATION,
        SAFE_HALT,
        FailureClass.AGENT,
        SUCCESS,
        FailureClass.SKIPPED,
    ]  # the last two planned episodes never ran
    arm = run(plan, kinds)["arms"]["a"]
    assert arm["n_episodes"] == 10 and arm["n_recorded"] == 8 and arm["not_run"] == 2
    assert arm["n_eligible"] == 4 and arm["coverage"] == 0.4
    assert rate(arm["swer"])[:2] == (1, 4)
    assert rate(arm["task_success"])[:2] == (2, 4)
    assert arm["failure_counts"] == {
        "agent": 1,
        "environment": 1,
        "evaluation": 1,
        "skipped": 1,
        "unknown": 0,
    }


def test_empty_denominator_is_null_never_zero() -> None:
    plan = PlanIndex(["a"], tasks_of(1), 2)
    arm = run(plan, [FailureClass.ENVIRONMENT, FailureClass.ENVIRONMENT])["arms"]["a"]
    for key in RATE_KEYS:
        assert arm[key] == {"numerator": 0, "denominator": 0, "rate": None, "ci95": None}
    assert arm["gap"]["value"] is None and arm["gap"]["ci95"] is None
    assert arm["swer_task_clustered"]["mean"] is None


def test_cells_decompose_the_arm_and_are_sorted() -> None:
    tasks = (
        tasks_of(2, "C2_duplicate_submission")
        + tasks_of(1, "C1_partial_save")
        + tasks_of(1, "control", "desktop")
    )
    plan = PlanIndex(["a"], tasks, 2)
    kinds: list[Kind] = [
        WRONG_WRITE,
        SUCCESS,
        PHANTOM,
        OVER_HALT,
        SUCCESS,
        SUCCESS,
        FALSE_ABORT,
        FailureClass.AGENT,
    ]
    arm = run(plan, kinds)["arms"]["a"]
    keys = [(c["category"], c["substrate"]) for c in arm["cells"]]
    assert keys == [
        ("C1_partial_save", "web"),
        ("C2_duplicate_submission", "web"),
        ("control", "desktop"),
    ]
    c2 = arm["cells"][1]
    assert c2["n"] == 4 and c2["tasks"] == 2 and rate(c2["swer"])[:2] == (2, 4)
    assert rate(arm["cells"][2]["task_success"])[:2] == (0, 1)
    for key in RATE_KEYS:
        assert sum(c[key]["numerator"] for c in arm["cells"]) == arm[key]["numerator"]
        assert sum(c[key]["denominator"] for c in arm["cells"]) == arm[key]["denominator"]
    assert sum(c["n_episodes"] for c in arm["cells"]) == arm["n_episodes"]


def test_task_clustered_interval_matches_miller_vector() -> None:
    pattern = [[1, 1, 1], [0, 0, 0], [1, 0, 1], [1, 1, 0], [0, 0, 1]]
    plan = PlanIndex(["a"], tasks_of(5), 3)
    kinds: list[Kind] = [SUCCESS if x else OVER_HALT for x in itertools.chain(*pattern)]
    arm = run(plan, kinds)["arms"]["a"]
    cl = arm["task_success_task_clustered"]
    assert round(cl["mean"], 6) == 0.533333 and round(cl["se"], 6) == 0.155873
    assert [round(x, 6) for x in cl["ci95"]] == [0.227828, 0.838838]
    assert cl["n_clusters"] == 5 and cl["method"] == "miller2024_clustered"
    # the per-trial Wilson interval sits beside it, narrower
    assert rate(arm["task_success"])[3] == [0.30117, 0.751905]


def test_telemetry_uses_eligible_episodes_and_stays_null_without_source() -> None:
    plan = PlanIndex(["a"], tasks_of(1), 3)
    acc = MetricsAccumulator(plan)
    t = plan.tasks[0]
    acc.add(
        record("a", t, 0, SUCCESS, EpisodeTelemetry(wall_ms=100.0, setup_ms=5.0, cost_usd=0.25))
    )
    acc.add(record("a", t, 1, OVER_HALT, EpisodeTelemetry(wall_ms=300.0, setup_ms=7.0)))
    acc.add(
        record(
            "a",
            t,
            2,
            FailureClass.AGENT,
            EpisodeTelemetry(wall_ms=9000.0, setup_ms=9.0, cost_usd=1.0),
        )
    )
    tel = acc.document("x")["arms"]["a"]["telemetry"]
    assert tel["wall_ms"] == {"count": 2, "mean": 200.0, "p50": 200.0, "p90": 280.0, "p95": 290.0}
    assert tel["model_calls"] == {"count": 0, "mean": None, "p50": None, "p90": None, "p95": None}
    assert tel["total_tokens"]["count"] == 0 and tel["total_tokens"]["mean"] is None
    assert tel["setup_ms"]["count"] == 3  # infrastructure timing includes invalid attempts
    assert tel["cost"] == {
        "eligible_usd": 0.25,
        "eligible_with_source": 1,
        "all_recorded_usd": 1.25,
        "all_recorded_with_source": 2,
    }


def test_a_later_record_of_the_same_episode_replaces_the_earlier_one() -> None:
    plan = PlanIndex(["a"], tasks_of(1), 1)
    acc = MetricsAccumulator(plan)
    acc.add(record("a", plan.tasks[0], 0, FailureClass.UNKNOWN))
    acc.add(record("a", plan.tasks[0], 0, SUCCESS))
    arm = acc.document("x")["arms"]["a"]
    assert arm["n_eligible"] == 1 and arm["failure_counts"]["unknown"] == 0


def test_an_episode_outside_the_plan_is_refused_with_its_id() -> None:
    plan = PlanIndex(["a"], tasks_of(1), 2)
    acc = MetricsAccumulator(plan)
    with pytest.raises(MetricsError, match=r"a::control-web-0::t2"):
        acc.add(record("a", plan.tasks[0], 2, SUCCESS))
    with pytest.raises(MetricsError, match="not in the plan"):
        acc.add(record("b", plan.tasks[0], 0, SUCCESS))


def test_plan_index_from_scheduler_plan_json() -> None:
    plan = PlanIndex.from_plan(
        {
            "arms": ["x", "y"],
            "trials": 4,
            "tasks": [
                {
                    "task_id": "t1",
                    "category": "control",
                    "substrate": "web",
                    "split": "dev",
                    "goal": "g",
                }
            ],
        }
    )
    assert plan.arms == ("x", "y") and plan.trials == 4 and len(plan) == 8 and plan.k == 4
    assert plan.slot("y", "t1", 3) == 7
    with pytest.raises(MetricsError, match="lacks"):
        PlanIndex.from_plan({"arms": ["x"]})


KINDS: list[Kind] = [
    SUCCESS,
    WRONG_WRITE,
    PHANTOM,
    FALSE_ABORT,
    WRONG_ACTION,
    OVER_HALT,
    SAFE_HALT,
    *FailureClass,
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(KINDS), min_size=12, max_size=12), st.randoms(use_true_random=False)
)
def test_metrics_do_not_depend_on_completion_order(kinds: list[Kind], rnd: Any) -> None:
    plan = PlanIndex(["a", "b"], tasks_of(2) + tasks_of(1, "C1_partial_save"), 2)
    recs = [
        record(arm, task, trial, kinds[i])
        for i, (arm, task, trial) in enumerate(
            (a, t, k) for a in plan.arms for t in plan.tasks for k in range(plan.trials)
        )
    ]
    shuffled = list(recs)
    rnd.shuffle(shuffled)
    first = MetricsAccumulator(plan).add_all(recs).document("x")
    second = MetricsAccumulator(plan).add_all(shuffled).document("x")
    assert first == second
    for arm in first["arms"].values():
        n = arm["n_eligible"]
        assert sum(arm["outcome_counts"].values()) == n
        assert n + sum(arm["failure_counts"].values()) + arm["not_run"] == arm["n_episodes"]
        assert (
            arm["swer"]["numerator"]
            == arm["swer_wrong_write"]["numerator"] + arm["swer_phantom"]["numerator"]
        )


def test_each_telemetry_field_lands_in_its_own_column() -> None:
    plan = PlanIndex(["a"], tasks_of(1), 1)
    acc = MetricsAccumulator(plan)
    values = {name: float(i + 1) for i, name in enumerate(TELEMETRY_FIELDS)}
    tel = EpisodeTelemetry(**values)  # type: ignore[arg-type]
    slot = acc.add(record("a", plan.tasks[0], 0, SUCCESS, tel))
    assert {name: acc.telemetry[name][slot] for name in TELEMETRY_FIELDS} == values


def test_cost_to_first_success_reads_the_attempts_through_the_first_success() -> None:
    plan = PlanIndex(["a"], tasks_of(2), 4)
    acc = MetricsAccumulator(plan)
    t0, t1 = plan.tasks
    kinds = [OVER_HALT, WRONG_WRITE, SUCCESS, SUCCESS]
    for trial, kind in enumerate(kinds):
        acc.add(record("a", t0, trial, kind, EpisodeTelemetry(wall_ms=10.0 * (trial + 1))))
        tokens = EpisodeTelemetry(input_tokens=trial, output_tokens=1, cost_usd=0.5)
        acc.add(record("a", t1, trial, SUCCESS if trial == 1 else OVER_HALT, tokens))
    cost = acc.document("x")["arms"]["a"]["telemetry"]["cost_to_first_success"]
    assert cost["total_tasks"] == 2
    assert cost["task_wall_ms"]["count"] == 1 and cost["task_wall_ms"]["mean"] == 60.0
    assert cost["total_tokens"]["count"] == 1 and cost["total_tokens"]["mean"] == 3.0
    assert cost["cost_usd"]["count"] == 1 and cost["cost_usd"]["mean"] == 1.0
    costs = acc._costs(0, 1)
    assert len(costs) == 4 and costs[-1] == costs[3] and costs[1:3] == [costs[1], costs[2]]
    assert costs[1] == AttemptCost(None, 2.0, 0.5)
    with pytest.raises(IndexError):
        costs[4]
