"""stats.py against the worked vectors (shared/reference/metric_vectors.json, copied here
so a clean clone can run them), rounded to 6 dp as the vectors are."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from effectbench.scoring.stats import (
    Z95,
    Rate,
    clustered_mean,
    describe,
    mcnemar,
    newcombe_independent,
    newcombe_paired,
    pass_at_k,
    pass_hat_k,
    percentile,
    task_level_mean,
    wilson,
)

# (k, n, lower, upper, lower at z=1.96, upper at z=1.96)
WILSON = [
    (0, 10, 0.0, 0.277533, 0.0, 0.27754),
    (10, 10, 0.722467, 1.0, 0.72246, 1.0),
    (50, 90, 0.452719, 0.653843, 0.452717, 0.653845),
    (9, 90, 0.053507, 0.179242, 0.053506, 0.179244),
    (54, 90, 0.496703, 0.69511, 0.496701, 0.695111),
    (0, 90, 0.0, 0.040936, 0.0, 0.040937),
    (1, 2, 0.094531, 0.905469, 0.094529, 0.905471),
    (2, 2, 0.34238, 1.0, 0.342372, 1.0),
    (4, 6, 0.299993, 0.903229, 0.299988, 0.903231),
    (40, 90, 0.346157, 0.547281, 0.346155, 0.547283),
    (1, 1, 0.206549, 1.0, 0.206543, 1.0),
]


@pytest.mark.parametrize(("k", "n", "lo", "hi", "lo196", "hi196"), WILSON)
def test_wilson_vectors(k: int, n: int, lo: float, hi: float, lo196: float, hi196: float) -> None:
    ci = wilson(k, n)
    assert ci is not None
    assert (round(ci[0], 6), round(ci[1], 6)) == (lo, hi)
    ci196 = wilson(k, n, z=1.96)
    assert ci196 is not None
    assert (round(ci196[0], 6), round(ci196[1], 6)) == (lo196, hi196)


def test_wilson_ends_are_snapped_exactly() -> None:
    hi = wilson(10, 10)
    assert hi is not None and hi[1] == 1.0
    full = wilson(90, 90)
    assert full is not None and full[1] == 1.0 and full[0] == pytest.approx(90 / (90 + Z95**2))
    zero = wilson(0, 90)
    assert zero is not None and zero[0] == 0.0 and zero[1] == pytest.approx(Z95**2 / (90 + Z95**2))


def test_wilson_zero_trials_is_null_not_zero() -> None:
    assert wilson(0, 0) is None
    assert Rate.of(0, 0).to_json() == {"numerator": 0, "denominator": 0, "rate": None, "ci95": None}


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        wilson(3, 2)


@given(st.integers(0, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_point_and_stays_in_unit_interval(kn: tuple[int, int]) -> None:
    k, n = kn
    ci = wilson(k, n)
    if n == 0:
        assert ci is None
        return
    assert ci is not None
    assert 0.0 <= ci[0] <= k / n <= ci[1] <= 1.0


def test_rate_json_shape() -> None:
    assert Rate.of(9, 90).to_json() == {
        "numerator": 9,
        "denominator": 90,
        "rate": 0.1,
        "ci95": [pytest.approx(0.053507, abs=1e-6), pytest.approx(0.179242, abs=1e-6)],
    }


# (n, c, k, pass@k fraction, pass^k fraction, plug-in pass@k, plug-in pass^k)
PASS_K = [
    (10, 3, 1, "3/10", "3/10", 0.3, 0.3),
    (10, 3, 5, "11/12", "0", 0.83193, 0.00243),
    (5, 2, 2, "7/10", "1/10", 0.64, 0.16),
    (3, 1, 3, "1", "0", 0.703704, 0.037037),
    (3, 2, 2, "1", "1/3", 0.888889, 0.444444),
    (8, 6, 4, "1", "3/14", 0.996094, 0.316406),
    (10, 0, 3, "0", "0", 0.0, 0.0),
    (10, 10, 10, "1", "1", 1.0, 1.0),
    (20, 5, 10, "1271/1292", "0", 0.943686, 1e-06),
    (5, 4, 2, "1", "3/5", 0.96, 0.64),
    (200, 13, 100, "8670143107/8670841134", "0", 0.998795, 0.0),
]


@pytest.mark.parametrize(("n", "c", "k", "at", "hat", "plug_at", "plug_hat"), PASS_K)
def test_unbiased_pass_at_k_and_pass_hat_k_are_exact(
    n: int, c: int, k: int, at: str, hat: str, plug_at: float, plug_hat: float
) -> None:
    assert pass_at_k(n, c, k) == Fraction(at)
    assert pass_hat_k(n, c, k) == Fraction(hat)
    # The plug-in formulas are biased; the estimator must not be them (except where they coincide).
    p = c / n
    assert round(1 - (1 - p) ** k, 6) == plug_at
    assert round(p**k, 6) == plug_hat
    if k > 1 and 0 < c < n:
        assert float(pass_at_k(n, c, k)) != pytest.approx(1 - (1 - p) ** k)


def test_pass_estimators_reject_k_above_n() -> None:
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_clustered_se_miller_vector() -> None:
    tasks = [[1, 1, 1], [0, 0, 0], [1, 0, 1], [1, 1, 0], [0, 0, 1]]
    res = clustered_mean((len(t), float(sum(t)), float(sum(x * x for x in t))) for t in tasks)
    assert res.mean is not None and res.se is not None and res.ci95 is not None
    assert round(res.mean, 6) == 0.533333
    assert round(res.se, 6) == 0.155873
    assert (round(res.ci95[0], 6), round(res.ci95[1], 6)) == (0.227828, 0.838838)
    # With one trial per task the clustered SE collapses to the naive CLT one (ddof 1).
    flat = [x for t in tasks for x in t]
    naive = clustered_mean((1, float(x), float(x)) for x in flat)
    assert naive.se is not None and round(naive.se, 6) == 0.133333
    assert naive.ci95 is not None and (round(naive.ci95[0], 6), round(naive.ci95[1], 6)) == (
        0.272005,
        0.794662,
    )


def test_task_level_clt_vector() -> None:
    tasks = [[1, 1, 1], [0, 0, 0], [1, 0, 1], [1, 1, 0], [0, 0, 1]]
    res = task_level_mean([sum(t) / len(t) for t in tasks])
    assert res.se is not None and res.ci95 is not None
    assert round(res.se, 6) == 0.169967
    assert (round(res.ci95[0], 6), round(res.ci95[1], 6)) == (0.200204, 0.866463)


def test_interval_of_one_cluster_or_none_is_null() -> None:
    assert clustered_mean([]).mean is None
    assert clustered_mean([(1, 1.0, 1.0)]).se is None
    assert task_level_mean([0.5]).ci95 is None
    assert task_level_mean([]).to_json()["mean"] is None


NEWCOMBE_INDEPENDENT = [
    (54, 90, 9, 90, 0.5, 0.36981, 0.605865),
    (50, 90, 0, 90, 0.555556, 0.444871, 0.653843),
    (9, 90, 0, 90, 0.1, 0.038054, 0.179242),
    (56, 70, 48, 80, 0.2, 0.052431, 0.333873),
    (0, 10, 0, 10, 0.0, -0.277533, 0.277533),
    (10, 10, 0, 10, 1.0, 0.607509, 1.0),
]


@pytest.mark.parametrize(("k1", "n1", "k2", "n2", "diff", "lo", "hi"), NEWCOMBE_INDEPENDENT)
def test_newcombe_independent_vectors(
    k1: int, n1: int, k2: int, n2: int, diff: float, lo: float, hi: float
) -> None:
    ci = newcombe_independent(k1, n1, k2, n2)
    assert ci is not None
    assert round(k1 / n1 - k2 / n2, 6) == diff
    assert (round(ci[0], 6), round(ci[1], 6)) == (lo, hi)


NEWCOMBE_PAIRED = [
    (36, 54, 0, 0, 0.6, 0.488888, 0.69511),
    (30, 40, 5, 15, 0.388889, 0.256792, 0.500898),
    (1, 1, 7, 12, -0.285714, -0.50692, -0.025559),
    (59, 6, 16, 80, -0.062112, -0.118621, -0.004625),
    (14, 5, 0, 22, 0.121951, 0.011483, 0.226493),
]


@pytest.mark.parametrize(("a", "b", "c", "d", "diff", "lo", "hi"), NEWCOMBE_PAIRED)
def test_newcombe_paired_vectors(
    a: int, b: int, c: int, d: int, diff: float, lo: float, hi: float
) -> None:
    ci = newcombe_paired(a, b, c, d)
    assert ci is not None
    assert round((b - c) / (a + b + c + d), 6) == diff
    assert (round(ci[0], 6), round(ci[1], 6)) == (lo, hi)


def test_paired_interval_is_not_the_independent_one() -> None:
    # The gap vector: an independent interval over the same margins is a different (wrong) answer.
    paired = newcombe_paired(30, 40, 5, 15)
    indep = newcombe_independent(70, 90, 35, 90)
    assert paired is not None and indep is not None
    assert round(paired[0], 6) != round(indep[0], 6)


@pytest.mark.parametrize(
    ("b", "c", "exact", "mid"),
    [
        (10, 2, 0.038574, 0.022461),
        (14, 0, 0.000122, 6.1e-05),
        (5, 5, 1.0, 1.0),
        (3, 1, 0.625, 0.375),
    ],
)
def test_mcnemar_vectors(b: int, c: int, exact: float, mid: float) -> None:
    res = mcnemar(b, c)
    assert round(res.exact_p, 6) == exact
    assert round(res.mid_p, 6) == mid
    assert mcnemar(c, b).exact_p == res.exact_p


def test_mcnemar_without_discordant_pairs() -> None:
    assert mcnemar(0, 0).exact_p == 1.0


def test_percentile_rule_vector() -> None:
    assert percentile([100.0, 300.0], 50) == 200.0
    assert percentile([100.0, 300.0], 90) == 280.0
    assert percentile([], 50) is None
    assert percentile([7.0], 95) == 7.0


def test_describe_empty_is_null_not_zero() -> None:
    assert describe([]) == {"count": 0, "mean": None, "p50": None, "p90": None, "p95": None}
    d = describe([35.0, 1.0, 2.0])
    assert d["count"] == 3 and d["p50"] == 2.0 and math.isclose(d["mean"], 38 / 3)


@pytest.mark.parametrize(("b", "c"), [(600, 420), (990, 30), (700, 700), (3000, 2950)])
def test_mcnemar_large_tables_agree_with_exact_integers(b: int, c: int) -> None:
    from fractions import Fraction

    m, lo = b + c, min(b, c)
    tail = Fraction(sum(math.comb(m, i) for i in range(lo + 1)), 1 << m)
    at = Fraction(math.comb(m, lo), 1 << m)
    got = mcnemar(b, c)
    assert got.exact_p == pytest.approx(float(min(Fraction(1), 2 * tail)), rel=1e-9, abs=1e-300)
    assert got.mid_p == pytest.approx(float(min(Fraction(1), 2 * tail - at)), rel=1e-9, abs=1e-300)
