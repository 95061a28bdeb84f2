"""Episode-level metrics of a run as a streaming projection over EpisodeRecords.

The accumulator keeps one byte per PLANNED episode (its outcome or failure class)
and a few floats of telemetry, indexed by plan position (arm, task, trial). So
memory follows the plan, never the log, completion order cannot change a number,
and a later record for the same episode simply replaces the earlier one.

Every agent rate uses the eligible (scored) episodes as denominator; ineligible
ones (failures of any class, UNREADABLE) leave it and show up in coverage and
failure_counts. Timing and cost live only under each arm's ``telemetry`` key, so
every other field is identical for the same plan at any concurrency.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, overload

import attrs

from effectbench.core.bounds import safe_fsum
from effectbench.core.errors import EffectBenchError
from effectbench.core.model import FailureClass, Outcome, SwerVariant, TrueState
from effectbench.projections.claims import comparison_claim, identical
from effectbench.projections.compare import Pair, compare_arms
from effectbench.projections.passk import (
    AttemptCost,
    Attempts,
    attempt_success_rate,
    cost_to_first_success,
    first_success_attempt,
    prefix_metrics,
    unbiased_estimators,
    unbiased_ks,
)
from effectbench.scoring.records import EpisodeRecord
from effectbench.scoring.stats import Z95, Rate, clustered_mean, describe, newcombe_paired

METRICS_SCHEMA: Final = "effectbench.metrics/1"


class MetricsError(EffectBenchError, ValueError):
    """A record that does not fit the plan (unknown arm, task or trial)."""


# --------------------------------------------------------------------------- episode codes

EMPTY: Final = 0
"""No record for this planned episode (yet)."""
_FAILURE_CODES: Final[dict[FailureClass, int]] = {fc: i + 1 for i, fc in enumerate(FailureClass)}
# Scored outcomes follow every failure code, so a new failure class can never collide.
SUCCESS: Final = len(_FAILURE_CODES) + 1
SWER_WRONG_WRITE: Final = SUCCESS + 1
SWER_PHANTOM: Final = SUCCESS + 2
_OUTCOME_CODES: Final[dict[Outcome, int]] = {
    Outcome.SUCCESS: SUCCESS,
    Outcome.FALSE_ABORT: SUCCESS + 3,
    Outcome.WRONG_ACTION: SUCCESS + 4,
    Outcome.OVER_HALT: SUCCESS + 5,
    Outcome.SAFE_HALT: SUCCESS + 6,
}
FIRST_ELIGIBLE: Final = SUCCESS
_OVER_HALT: Final = _OUTCOME_CODES[Outcome.OVER_HALT]
_N_CODES: Final = SUCCESS + 7
_SCREEN_CODES: Final = (SUCCESS, SWER_WRONG_WRITE, SWER_PHANTOM)
"""Eligible episodes whose report claimed success (the classifier's truth table)."""


def episode_code(rec: EpisodeRecord) -> int:
    """The one byte the accumulator keeps for an episode."""
    if rec.eligible and rec.outcome is not None:
        if rec.outcome is Outcome.SILENT_WRONG_EFFECT:
            if rec.swer_variant is SwerVariant.WRONG_WRITE or (
                rec.swer_variant is None and rec.true_state is TrueState.WRONG_PERSISTED
            ):
                return SWER_WRONG_WRITE
            return SWER_PHANTOM
        return _OUTCOME_CODES[rec.outcome]
    return _FAILURE_CODES[rec.failure_class or FailureClass.UNKNOWN]


# --------------------------------------------------------------------------- the plan


@attrs.frozen
class TaskAxes:
    task_id: str
    category: str
    substrate: str
    split: str


def _arms(v: Iterable[str]) -> tuple[str, ...]:
    return tuple(v)


def _tasks(v: Iterable[TaskAxes]) -> tuple[TaskAxes, ...]:
    return tuple(v)


@attrs.frozen
class PlanIndex:
    """The planned episode set: arms x tasks x trials, in the one plan order."""

    arms: tuple[str, ...] = attrs.field(converter=_arms)
    tasks: tuple[TaskAxes, ...] = attrs.field(converter=_tasks)
    trials: int
    _arm_pos: Mapping[str, int] = attrs.field(init=False, repr=False, eq=False)
    _task_pos: Mapping[str, int] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_arm_pos", {a: i for i, a in enumerate(self.arms)})
        object.__setattr__(self, "_task_pos", {t.task_id: i for i, t in enumerate(self.tasks)})
        if len(self._arm_pos) != len(self.arms) or len(self._task_pos) != len(self.tasks):
            raise MetricsError("the plan names an arm or a task twice")
        if self.trials < 1:
            raise MetricsError(f"the plan's trial count must be >= 1, got {self.trials}")

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any]) -> PlanIndex:
        """From the plan written into run.started (or the manifest, which repeats it)."""
        try:
            arms = tuple(a if isinstance(a, str) else a["name"] for a in plan["arms"])
            tasks = tuple(
                TaskAxes(
                    str(t["task_id"]),
                    str(t["category"]),
                    str(t["substrate"]),
                    str(t.get("split", "dev")),
                )
                for t in plan["tasks"]
            )
            return cls(arms, tasks, int(plan["trials"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MetricsError(
                f"the plan lacks arms, tasks or trials ({exc!r}); is this an effectbench log?"
            ) from None

    @property
    def k(self) -> int:
        """The smallest planned repeat count: every task is planned with ``trials`` trials."""
        return self.trials

    @property
    def per_arm(self) -> int:
        return len(self.tasks) * self.trials

    def __len__(self) -> int:
        return len(self.arms) * self.per_arm

    def slot(self, arm: str, task_id: str, trial: int) -> int:
        a = self._arm_pos.get(arm)
        t = self._task_pos.get(task_id)
        if a is None or t is None or not 0 <= trial < self.trials:
            raise MetricsError(
                f"episode {arm}::{task_id}::t{trial} is not in the plan (arms "
                f"{', '.join(self.arms)}; {len(self.tasks)} tasks; trials 0..{self.trials - 1})"
            )
        return (a * len(self.tasks) + t) * self.trials + trial

    def slots(self) -> Iterator[tuple[int, str, TaskAxes, int]]:
        """(slot, arm, task, trial) in plan order."""
        i = 0
        for arm in self.arms:
            for task in self.tasks:
                for trial in range(self.trials):
                    yield i, arm, task, trial
                    i += 1


# --------------------------------------------------------------------------- the accumulator

TELEMETRY_FIELDS: Final = (
    "wall_ms",
    "setup_ms",
    "model_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "actions",
)
_NAN: Final = float("nan")


class MetricsAccumulator:
    """Feed EpisodeRecords in any order; ``document()`` gives metrics.json's content."""

    def __init__(self, plan: PlanIndex, z: float = Z95) -> None:
        self.plan = plan
        self.z = z
        n = len(plan)
        self.codes = bytearray(n)
        self.telemetry: dict[str, array[float]] = {
            f: array("d", [_NAN]) * n for f in TELEMETRY_FIELDS
        }
        self._columns = tuple(self.telemetry[f] for f in TELEMETRY_FIELDS)
        self.call_latency: dict[int, tuple[float, ...]] = {}
        """Per slot, the known latencies of its model calls; only slots that have calls
        (sparse: a run without model calls keeps nothing here)."""
        self.records = 0

    def add(self, rec: EpisodeRecord) -> int:
        """Record one episode (a later record of the same episode replaces it); returns its slot."""
        slot = self.plan.slot(rec.arm, rec.task_id, rec.trial)
        self.codes[slot] = episode_code(rec)
        t = rec.telemetry
        # one line per field (a loop over getattr costs more than the rest of add)
        wall, setup, calls, tin, tout, cost, actions = self._columns
        wall[slot] = _NAN if (v := t.wall_ms) is None else float(v)
        setup[slot] = _NAN if (v := t.setup_ms) is None else float(v)
        calls[slot] = _NAN if (v := t.model_calls) is None else float(v)
        tin[slot] = _NAN if (v := t.input_tokens) is None else float(v)
        tout[slot] = _NAN if (v := t.output_tokens) is None else float(v)
        cost[slot] = _NAN if (v := t.cost_usd) is None else float(v)
        actions[slot] = _NAN if (v := t.actions) is None else float(v)
        if t.model_call_latency_ms:
            self.call_latency[slot] = known_latencies(t.model_call_latency_ms)
        elif self.call_latency:
            self.call_latency.pop(slot, None)
        self.records += 1
        return slot

    def add_all(self, records: Iterable[EpisodeRecord]) -> MetricsAccumulator:
        for rec in records:
            self.add(rec)
        return self

    # ----------------------------------------------------------------- views

    def _arm_range(self, arm_index: int) -> range:
        start = arm_index * self.plan.per_arm
        return range(start, start + self.plan.per_arm)

    def _task_codes(self, arm_index: int, task_index: int) -> bytearray:
        start = (arm_index * len(self.plan.tasks) + task_index) * self.plan.trials
        return self.codes[start : start + self.plan.trials]

    def attempts(self, arm_index: int) -> list[Attempts]:
        """Per task, per planned trial: True (SUCCESS), False (scored otherwise), None (not
        scored)."""
        return [
            [None if c < FIRST_ELIGIBLE else c == SUCCESS for c in self._task_codes(arm_index, t)]
            for t in range(len(self.plan.tasks))
        ]

    def _costs(self, arm_index: int, task_index: int) -> _Costs:
        start = (arm_index * len(self.plan.tasks) + task_index) * self.plan.trials
        return _Costs(self.telemetry, start, self.plan.trials)

    # ----------------------------------------------------------------- results

    def arm_metrics(self, arm_index: int) -> dict[str, Any]:
        plan, z = self.plan, self.z
        rng = self._arm_range(arm_index)
        seg = self.codes[rng.start : rng.stop]
        counts = [seg.count(c) for c in range(_N_CODES)]
        block = _rate_block(counts, plan.per_arm, z)
        block["n_recorded"] = plan.per_arm - counts[EMPTY]
        block["failure_counts"] = {fc.value: counts[code] for fc, code in _FAILURE_CODES.items()}
        block["not_run"] = counts[EMPTY]
        # task-clustered intervals beside the per-trial Wilson ones
        swer_cl: list[tuple[int, float, float]] = []
        halt_cl: list[tuple[int, float, float]] = []
        succ_cl: list[tuple[int, float, float]] = []
        for t in range(len(plan.tasks)):
            tc = self._task_codes(arm_index, t)
            n_t = sum(1 for c in tc if c >= FIRST_ELIGIBLE)
            sw = float(tc.count(SWER_WRONG_WRITE) + tc.count(SWER_PHANTOM))
            oh = float(tc.count(_OVER_HALT))
            su = float(tc.count(SUCCESS))
            swer_cl.append((n_t, sw, sw))
            halt_cl.append((n_t, oh, oh))
            succ_cl.append((n_t, su, su))
        block["swer_task_clustered"] = clustered_mean(swer_cl, z).to_json()
        block["over_halt_task_clustered"] = clustered_mean(halt_cl, z).to_json()
        block["task_success_task_clustered"] = clustered_mean(succ_cl, z).to_json()
        block["cells"] = self._cells(arm_index)
        block["per_task"] = self._per_task(arm_index)
        attempts = self.attempts(arm_index)
        block["k"] = plan.k
        block.update(prefix_metrics(attempts, plan.k, z))
        block.update(unbiased_estimators(attempts, unbiased_ks(plan.trials, plan.k), z))
        block["attempt_success_rate"] = attempt_success_rate(attempts, z)
        block["first_success_attempt"] = first_success_attempt(attempts)
        block["telemetry"] = self._telemetry(arm_index, attempts)
        return block

    def _cells(self, arm_index: int) -> list[dict[str, Any]]:
        groups: dict[tuple[str, str], list[int]] = {}
        for t, task in enumerate(self.plan.tasks):
            groups.setdefault((task.category, task.substrate), []).append(t)
        cells = []
        for (category, substrate), task_idx in sorted(groups.items()):
            counts = [0] * _N_CODES
            for t in task_idx:
                tc = self._task_codes(arm_index, t)
                for c in range(_N_CODES):
                    counts[c] += tc.count(c)
            cell = {"category": category, "substrate": substrate, "tasks": len(task_idx)}
            cell.update(_rate_block(counts, len(task_idx) * self.plan.trials, self.z))
            cell["n"] = cell["n_eligible"]
            cells.append(cell)
        return cells

    def _per_task(self, arm_index: int) -> list[dict[str, Any]]:
        """One entry per task in plan order: its rates over its own trials, and whether
        every trial came out the same (``identical``)."""
        out = []
        for t, task in enumerate(self.plan.tasks):
            tc = self._task_codes(arm_index, t)
            entry: dict[str, Any] = {
                "task_id": task.task_id,
                "category": task.category,
                "substrate": task.substrate,
            }
            entry.update(_rate_block([tc.count(c) for c in range(_N_CODES)], len(tc), self.z))
            entry["identical"] = identical(tc)
            out.append(entry)
        return out

    def _telemetry(self, arm_index: int, attempts: Sequence[Attempts]) -> dict[str, Any]:
        """Timing, usage and cost: eligible episodes only, except setup (infrastructure)."""
        rng = self._arm_range(arm_index)
        codes = self.codes
        eligible = [s for s in rng if codes[s] >= FIRST_ELIGIBLE]
        recorded = [s for s in rng if codes[s] != EMPTY]
        tel = self.telemetry

        def known(name: str, slots: Iterable[int]) -> list[float]:
            col = tel[name]
            return [v for v in (col[s] for s in slots) if not math.isnan(v)]

        out: dict[str, Any] = {
            name: describe(known(name, eligible))
            for name in ("wall_ms", "model_calls", "input_tokens", "output_tokens", "actions")
        }
        out["total_tokens"] = describe(
            v
            for v in (tel["input_tokens"][s] + tel["output_tokens"][s] for s in eligible)
            if not math.isnan(v)
        )
        lat = self.call_latency
        out["model_latency_ms"] = describe(v for s in eligible for v in lat.get(s, ()))
        out["model_latency_ms"]["scope"] = "model calls of eligible episodes"
        out["setup_ms"] = describe(known("setup_ms", recorded))
        out["setup_ms"]["scope"] = "all recorded episodes (infrastructure timing)"
        costs_eligible = known("cost_usd", eligible)
        costs_all = known("cost_usd", recorded)
        out["cost_usd"] = describe(costs_eligible)
        out["cost"] = {
            "eligible_usd": safe_fsum(costs_eligible) if costs_eligible else None,
            "eligible_with_source": len(costs_eligible),
            "all_recorded_usd": safe_fsum(costs_all) if costs_all else None,
            "all_recorded_with_source": len(costs_all),
        }
        out["cost_to_first_success"] = cost_to_first_success(
            (a, self._costs(arm_index, t)) for t, a in enumerate(attempts)
        )
        return out

    def comparisons(self) -> list[dict[str, Any]]:
        """Each pair of arms in plan order, paired by (task, trial)."""
        plan = self.plan
        out = []
        for i in range(len(plan.arms)):
            for j in range(i + 1, len(plan.arms)):
                swer: list[list[Pair]] = []
                halt: list[list[Pair]] = []
                succ: list[list[Pair]] = []
                pairs: list[list[tuple[int, int]]] = []
                for t in range(len(plan.tasks)):
                    a, b = self._task_codes(i, t), self._task_codes(j, t)
                    both = [
                        (x, y)
                        for x, y in zip(a, b, strict=True)
                        if x >= FIRST_ELIGIBLE and y >= FIRST_ELIGIBLE
                    ]
                    pairs.append(both)
                    swer.append([(_is_swer(x), _is_swer(y)) for x, y in both])
                    halt.append([(x == _OVER_HALT, y == _OVER_HALT) for x, y in both])
                    succ.append([(x == SUCCESS, y == SUCCESS) for x, y in both])
                block = compare_arms(
                    plan.arms[i], plan.arms[j], swer, succ, plan.per_arm, self.z, over_halt=halt
                )
                block.update(comparison_claim(pairs))
                out.append(block)
        return out

    def document(self, scoring_version: str) -> dict[str, Any]:
        """metrics.json: the stable shape of issue 5 plus the plan facts it depends on."""
        return {
            "schema": METRICS_SCHEMA,
            "scoring_version": scoring_version,
            "z": self.z,
            "k": self.plan.k,
            "arms": {arm: self.arm_metrics(i) for i, arm in enumerate(self.plan.arms)},
            "arm_order": list(self.plan.arms),
            "comparisons": self.comparisons(),
        }


class _Costs(Sequence[AttemptCost]):
    """One task's attempt costs, built only for the attempts read (cost_to_first_success
    reads through the first success, not every trial)."""

    def __init__(self, telemetry: Mapping[str, array[float]], start: int, n: int) -> None:
        self._wall = telemetry["wall_ms"]
        self._tin = telemetry["input_tokens"]
        self._tout = telemetry["output_tokens"]
        self._cost = telemetry["cost_usd"]
        self._start = start
        self._n = n

    def __len__(self) -> int:
        return self._n

    def _at(self, i: int) -> AttemptCost:
        s = self._start + i
        return AttemptCost(
            _opt(self._wall[s]), _opt(self._tin[s] + self._tout[s]), _opt(self._cost[s])
        )

    @overload
    def __getitem__(self, i: int) -> AttemptCost: ...
    @overload
    def __getitem__(self, i: slice) -> list[AttemptCost]: ...
    def __getitem__(self, i: int | slice) -> AttemptCost | list[AttemptCost]:
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._at(i)


def known_latencies(values: Iterable[Any]) -> tuple[float, ...]:
    """The finite, non-negative numbers among a row's per-call latencies (the rest unknown)."""
    return tuple(
        float(v)
        for v in values
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
    )


def _opt(v: float) -> float | None:
    return None if math.isnan(v) else v


def _is_swer(code: int) -> bool:
    return code in (SWER_WRONG_WRITE, SWER_PHANTOM)


def _rate_block(counts: Sequence[int], planned: int, z: float) -> dict[str, Any]:
    """The headline fields of an arm or a cell from its code counts."""
    n = sum(counts[FIRST_ELIGIBLE:])
    ww, ph, su = counts[SWER_WRONG_WRITE], counts[SWER_PHANTOM], counts[SUCCESS]
    screen = sum(counts[c] for c in _SCREEN_CODES)
    over_halt = counts[_OVER_HALT]
    outcome_counts = {o.value.lower(): 0 for o in Outcome}
    outcome_counts[Outcome.SILENT_WRONG_EFFECT.value.lower()] = ww + ph
    for o, code in _OUTCOME_CODES.items():
        outcome_counts[o.value.lower()] = counts[code]
    # Paired within the arm's own episodes: (screen claimed success, effect-verified success).
    # SUCCESS implies a success report, so "task only" is 0 by the truth table.
    gap_ci = newcombe_paired(su, screen - su, 0, n - screen, z)
    return {
        "n_episodes": planned,
        "n_eligible": n,
        "coverage": (n / planned) if planned else None,
        "swer": Rate.of(ww + ph, n, z).to_json(),
        "swer_wrong_write": Rate.of(ww, n, z).to_json(),
        "swer_phantom": Rate.of(ph, n, z).to_json(),
        "over_halt": Rate.of(over_halt, n, z).to_json(),
        "task_success": Rate.of(su, n, z).to_json(),
        "screen_success": Rate.of(screen, n, z).to_json(),
        "gap": {
            "value": ((screen - su) / n) if n else None,
            "screen_success": screen,
            "task_success": su,
            "denominator": n,
            "ci95": None if gap_ci is None else [gap_ci[0], gap_ci[1]],
            "method": "newcombe_paired",
        },
        "outcome_counts": outcome_counts,
    }
