"""Repeated-trial metrics of one arm: the pass@k family, first success, cost to it.

Input is each task's attempts in PLANNED trial order, one value per attempt:
True (SUCCESS), False (scored, not a success) or None (not eligible, or never ran).
k comes from the plan (its smallest planned repeat count), never from how many
attempts happened to finish, so losing evidence cannot raise a score unseen:
every prefix metric carries its coverage (eligible tasks / tasks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import attrs

from effectbench.core.bounds import safe_fsum
from effectbench.scoring.stats import Z95, describe, pass_at_k, pass_hat_k, task_level_mean, wilson

Attempts = Sequence[bool | None]

UNBIASED_KS: tuple[int, ...] = (1, 2, 4, 8)


def _prefix_block(successes: int, eligible: int, total: int, k: int, z: float) -> dict[str, Any]:
    ci = wilson(successes, eligible, z)
    return {
        "k": k,
        "successes": successes,
        "eligible_tasks": eligible,
        "total_tasks": total,
        "coverage": (eligible / total) if total else None,
        "value": (successes / eligible) if eligible else None,
        "ci95": None if ci is None else [ci[0], ci[1]],
    }


def prefix_metrics(tasks: Sequence[Attempts], k: int, z: float = Z95) -> dict[str, dict[str, Any]]:
    """pass@1, pass@k and pass^k over tasks whose first 1 (resp. k) planned attempts are eligible.

    One Bernoulli per task, so the interval is Wilson over tasks. A task whose first
    attempt is ineligible leaves pass@1 entirely; it is never counted as a failure.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    total = len(tasks)
    e1 = s1 = ek = sk_any = sk_all = 0
    for attempts in tasks:
        if attempts and attempts[0] is not None:
            e1 += 1
            s1 += attempts[0] is True
        head = attempts[:k]
        if len(head) == k and all(a is not None for a in head):
            ek += 1
            sk_any += any(head)
            sk_all += all(head)
    return {
        "pass_at_1": _prefix_block(s1, e1, total, 1, z),
        "pass_at_k": _prefix_block(sk_any, ek, total, k, z),
        "pass_pow_k": _prefix_block(sk_all, ek, total, k, z),
    }


def unbiased_estimators(
    tasks: Sequence[Attempts], ks: Iterable[int], z: float = Z95
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per-task unbiased pass@k (Chen 2021) and pass^k (Yao 2024), averaged over tasks.

    Each task uses all its n_t eligible attempts with its OWN n_t (a global trial count
    mis-scores tasks that lost attempts), and enters the mean for k only when n_t >= k.
    The interval is task-level (the task is the unit), not Wilson.
    """
    counts = [(sum(a is not None for a in t), sum(a is True for a in t)) for t in tasks]
    at: dict[str, dict[str, Any]] = {}
    hat: dict[str, dict[str, Any]] = {}
    for k in sorted(set(ks)):
        per_at: list[Fraction] = []
        per_hat: list[Fraction] = []
        for n, c in counts:
            if n >= k:
                per_at.append(pass_at_k(n, c, k))
                per_hat.append(pass_hat_k(n, c, k))
        at[str(k)] = _estimator_block(k, per_at, len(tasks), z)
        hat[str(k)] = _estimator_block(k, per_hat, len(tasks), z)
    return {"pass_at_k_unbiased": at, "pass_hat_k": hat}


def _estimator_block(k: int, per_task: list[Fraction], total: int, z: float) -> dict[str, Any]:
    exact_mean = (sum(per_task, Fraction(0)) / len(per_task)) if per_task else None
    interval = task_level_mean([float(v) for v in per_task], z)
    return {
        "k": k,
        "tasks": len(per_task),
        "total_tasks": total,
        "value": None if exact_mean is None else float(exact_mean),
        "se": interval.se,
        "ci95": None if interval.ci95 is None else [interval.ci95[0], interval.ci95[1]],
        "method": interval.method,
    }


def unbiased_ks(max_attempts: int, plan_k: int) -> tuple[int, ...]:
    """The ks reported: 1, 2, 4, 8 and the plan's k, wherever some task could have n >= k."""
    return tuple(k for k in sorted({*UNBIASED_KS, plan_k}) if 1 <= k <= max_attempts)


def attempt_success_rate(tasks: Sequence[Attempts], z: float = Z95) -> dict[str, Any]:
    """SUCCESS over eligible attempts, pooled (Wilson); trials of a task are correlated,
    so read it beside the task-clustered interval, not as a statement about tasks."""
    eligible = sum(a is not None for t in tasks for a in t)
    successes = sum(a is True for t in tasks for a in t)
    ci = wilson(successes, eligible, z)
    return {
        "successes": successes,
        "eligible_attempts": eligible,
        "value": (successes / eligible) if eligible else None,
        "ci95": None if ci is None else [ci[0], ci[1]],
    }


def _eligible_prefix_to_success(attempts: Attempts) -> int | None:
    """Index of the first success along the continuous eligible prefix; None otherwise."""
    for i, a in enumerate(attempts):
        if a is None:
            return None
        if a:
            return i
    return None


def first_success_attempt(tasks: Sequence[Attempts]) -> dict[str, Any]:
    """1-based attempt number of each task's first success (tasks that reached one along
    their continuous eligible prefix); an ineligible attempt first breaks the chain."""
    values = [float(i + 1) for t in tasks if (i := _eligible_prefix_to_success(t)) is not None]
    out = describe(values)
    out["total_tasks"] = len(tasks)
    return out


@attrs.frozen
class AttemptCost:
    """What one attempt cost; None where the attempt had no source for it."""

    wall_ms: float | None
    total_tokens: float | None
    cost_usd: float | None


COST_FIELDS: tuple[str, ...] = ("task_wall_ms", "total_tokens", "cost_usd")


def cost_to_first_success(
    tasks: Iterable[tuple[Attempts, Sequence[AttemptCost]]],
) -> dict[str, Any]:
    """Cumulative wall time, tokens and cost through each task's first success.

    Summed along the continuous eligible prefix only; a task whose sum would include an
    attempt without a source for a field has no value for that field (null, not 0).
    """
    sums: dict[str, list[float]] = {f: [] for f in COST_FIELDS}
    n_tasks = 0
    for attempts, costs in tasks:
        n_tasks += 1
        first = _eligible_prefix_to_success(attempts)
        if first is None:
            continue
        through = costs[: first + 1]
        for name, pick in (
            ("task_wall_ms", [c.wall_ms for c in through]),
            ("total_tokens", [c.total_tokens for c in through]),
            ("cost_usd", [c.cost_usd for c in through]),
        ):
            if all(v is not None and not math.isnan(v) for v in pick):
                total = safe_fsum(v for v in pick if v is not None)
                if total is not None:
                    sums[name].append(total)
    out: dict[str, Any] = {name: describe(vals) for name, vals in sums.items()}
    out["total_tasks"] = n_tasks
    return out
