"""Interval estimates and tests used by every metric; pure functions of counts.

Why these and not others: a Wilson interval stays inside [0, 1] and behaves at
0/n and n/n, where small benchmark studies live; trials of one task are
correlated, so a task-clustered interval sits beside it; two arms share tasks and
payloads, so they are compared paired (Newcombe square-and-add, McNemar).
Every formula is checked against shared/reference/metric_vectors.json.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import attrs

from effectbench.core.bounds import safe_fsum

Z95 = 1.959963984540054
"""Phi^-1(0.975), pinned so every artifact states the exact z it used."""

Interval = tuple[float, float]


def wilson(k: int, n: int, z: float = Z95) -> Interval | None:
    """Wilson score interval for k successes in n trials; None when n == 0.

    The ends are snapped: at k == 0 the lower end is exactly 0.0 and at k == n the
    upper end is exactly 1.0 (the float formula lands a hair off, e.g. 0.9999999999999999).
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return (lo, hi)


@attrs.frozen
class Rate:
    """A proportion with its raw counts: a rate is never reported without them."""

    numerator: int
    denominator: int
    rate: float | None
    ci95: Interval | None

    @classmethod
    def of(cls, k: int, n: int, z: float = Z95) -> Rate:
        return cls(k, n, (k / n) if n else None, wilson(k, n, z))

    def to_json(self) -> dict[str, Any]:
        return {
            "numerator": self.numerator,
            "denominator": self.denominator,
            "rate": self.rate,
            "ci95": None if self.ci95 is None else [self.ci95[0], self.ci95[1]],
        }


@attrs.frozen
class MeanInterval:
    """A mean with a normal-approximation interval (clamped to [0, 1] for proportions)."""

    mean: float | None
    se: float | None
    ci95: Interval | None
    n_clusters: int
    n: int
    method: str

    def to_json(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "se": self.se,
            "ci95": None if self.ci95 is None else [self.ci95[0], self.ci95[1]],
            "n_clusters": self.n_clusters,
            "n": self.n,
            "method": self.method,
        }


def _clamped(mean: float, se: float, z: float, lo: float, hi: float) -> Interval:
    return (max(lo, mean - z * se), min(hi, mean + z * se))


def clustered_mean(
    clusters: Iterable[tuple[int, float, float]], z: float = Z95, bounds: Interval = (0.0, 1.0)
) -> MeanInterval:
    """Pooled mean with the clustered standard error of Miller 2024 (arXiv:2411.00640).

    Each cluster (a task) is given as (n_c, sum of values, sum of squared values), so a
    caller can stream episodes and keep three numbers per task. The variance is the
    per-trial CLT one (ddof 1) plus the within-task cross terms
    sum_c sum_{i != j} (x_ic - m)(x_jc - m) / n^2.
    """
    cl = [(nc, s, q) for nc, s, q in clusters if nc > 0]
    n = sum(nc for nc, _, _ in cl)
    if n == 0:
        return MeanInterval(None, None, None, len(cl), 0, "miller2024_clustered")
    total = sum(s for _, s, _ in cl)
    m = total / n
    if n < 2:
        return MeanInterval(m, None, None, len(cl), n, "miller2024_clustered")
    sq_dev = sum(q - 2 * m * s + nc * m * m for nc, s, q in cl)
    var_clt = sq_dev / (n - 1) / n
    cross = 0.0
    for nc, s, q in cl:
        dev_sum = s - nc * m
        dev_sq = q - 2 * m * s + nc * m * m
        cross += dev_sum * dev_sum - dev_sq
    var = max(0.0, var_clt + cross / (n * n))
    se = math.sqrt(var)
    return MeanInterval(m, se, _clamped(m, se, z, *bounds), len(cl), n, "miller2024_clustered")


def task_level_mean(
    values: Sequence[float], z: float = Z95, bounds: Interval = (0.0, 1.0)
) -> MeanInterval:
    """Mean over tasks with a task-level CLT interval (sd with ddof 1 / sqrt(T)).

    Used for per-task estimators (unbiased pass@k, pass^k) whose unit is the task.
    """
    t = len(values)
    if t == 0:
        return MeanInterval(None, None, None, 0, 0, "task_level_clt")
    m = math.fsum(values) / t
    if t < 2:
        return MeanInterval(m, None, None, t, t, "task_level_clt")
    var = math.fsum((v - m) ** 2 for v in values) / (t - 1)
    se = math.sqrt(var / t)
    return MeanInterval(m, se, _clamped(m, se, z, *bounds), t, t, "task_level_clt")


def pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Unbiased pass@k of one task (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), exact."""
    _check_nck(n, c, k)
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def pass_hat_k(n: int, c: int, k: int) -> Fraction:
    """Unbiased pass^k of one task (tau-bench, Yao et al. 2024): C(c, k) / C(n, k), exact."""
    _check_nck(n, c, k)
    return Fraction(math.comb(c, k), math.comb(n, k))


def _check_nck(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def newcombe_independent(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> Interval | None:
    """Newcombe 1998 hybrid score interval (method 10) for p1 - p2 of independent samples."""
    w1, w2 = wilson(k1, n1, z), wilson(k2, n2, z)
    if w1 is None or w2 is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    d = p1 - p2
    lo = d - math.sqrt((p1 - w1[0]) ** 2 + (w2[1] - p2) ** 2)
    hi = d + math.sqrt((w1[1] - p1) ** 2 + (p2 - w2[0]) ** 2)
    return (max(-1.0, lo), min(1.0, hi))


def newcombe_paired(a: int, b: int, c: int, d: int, z: float = Z95) -> Interval | None:
    """Newcombe 1998 square-and-add interval (method 10) for a paired difference p1 - p2.

    a: both succeed; b: first only; c: second only; d: neither. The correlation
    estimate carries the n/2 continuity correction when positive. Used for the
    screen-task gap within one arm and for arm-vs-arm differences paired by (task, trial).
    """
    n = a + b + c + d
    if n == 0:
        return None
    r1, r2 = a + b, a + c
    w1, w2 = wilson(r1, n, z), wilson(r2, n, z)
    assert w1 is not None and w2 is not None
    p1, p2 = r1 / n, r2 / n
    psi = paired_phi(a, b, c, d)
    diff = p1 - p2
    dl1, du1 = p1 - w1[0], w1[1] - p1
    dl2, du2 = p2 - w2[0], w2[1] - p2
    lo = diff - math.sqrt(max(0.0, dl1 * dl1 + du2 * du2 - 2 * psi * dl1 * du2))
    hi = diff + math.sqrt(max(0.0, dl2 * dl2 + du1 * du1 - 2 * psi * dl2 * du1))
    return (max(-1.0, lo), min(1.0, hi))


def paired_phi(a: int, b: int, c: int, d: int) -> float:
    """Correlation of the two paired proportions, corrected by n/2 when ad - bc > 0."""
    n = a + b + c + d
    row1, row2, col1, col2 = a + b, c + d, a + c, b + d
    if 0 in (row1, row2, col1, col2):
        return 0.0
    cross = a * d - b * c
    if cross > n / 2:
        num = cross - n / 2
    elif cross >= 0:
        return 0.0
    else:
        num = float(cross)
    return num / math.sqrt(row1 * row2 * col1 * col2)


_EXACT_MCNEMAR_MAX = 1000
"""Up to this many discordant pairs the p-values are computed with exact integers."""


@attrs.frozen
class McNemar:
    """McNemar's test on the discordant pairs of a paired comparison."""

    b: int
    c: int
    exact_p: float
    mid_p: float

    def to_json(self) -> dict[str, Any]:
        return {"b": self.b, "c": self.c, "exact_p": self.exact_p, "mid_p": self.mid_p}


def mcnemar(b: int, c: int) -> McNemar:
    """Exact conditional McNemar p (two-sided binomial on b + c at 1/2) and its mid-p."""
    m = b + c
    if m == 0:
        return McNemar(b, c, 1.0, 1.0)
    lo = min(b, c)
    if m <= _EXACT_MCNEMAR_MAX:
        total = 1 << m
        tail = sum(math.comb(m, i) for i in range(lo + 1))
        at = math.comb(m, lo)
        exact = min(Fraction(1), Fraction(2 * tail, total))
        mid = min(Fraction(1), Fraction(2 * tail - at, total))
        return McNemar(b, c, float(exact), float(mid))
    # Large tables: big-integer binomials cost O(m^2) digits; log-space terms keep full
    # double precision for the tail probabilities that matter.
    log_half_m = m * math.log(0.5)
    lg_m = math.lgamma(m + 1)
    terms = [
        math.exp(lg_m - math.lgamma(i + 1) - math.lgamma(m - i + 1) + log_half_m)
        for i in range(lo + 1)
    ]
    tail_f = math.fsum(terms)
    return McNemar(b, c, min(1.0, 2 * tail_f), min(1.0, 2 * tail_f - terms[-1]))


def percentile(sorted_values: Sequence[float], p: float) -> float | None:
    """Linear-interpolation percentile of already-sorted values: k = (len-1) * p / 100."""
    if not sorted_values:
        return None
    if not 0 <= p <= 100:
        raise ValueError(f"percentile p must be in [0, 100], got {p}")
    k = (len(sorted_values) - 1) * p / 100.0
    f = math.floor(k)
    c = math.ceil(k)
    lo = float(sorted_values[f])
    if f == c:
        return lo
    return lo + (float(sorted_values[c]) - lo) * (k - f)


def describe(values: Iterable[float]) -> dict[str, Any]:
    """count, mean, p50, p90, p95 of the values; mean and percentiles null when empty."""
    s = sorted(values)
    n = len(s)
    return {
        "count": n,
        "mean": None if not n or (total := safe_fsum(s)) is None else total / n,
        "p50": percentile(s, 50),
        "p90": percentile(s, 90),
        "p95": percentile(s, 95),
    }
