"""The timed calls' stop rule: the median known to within the target, by a 95% confidence
interval that assumes no distribution (order statistics). The harness (C) decides when to stop
from its own samples; perfgym.outcome computes the same figure in Python."""
import math
import random

import pytest

from perfgym.outcome import Timing, median_ci_rank, median_halfwidth


def binomial_below(n: int, j: int) -> float:
    """P(Binomial(n, 1/2) < j)."""
    return sum(math.comb(n, i) for i in range(j)) / 2 ** n


@pytest.mark.parametrize("n", range(1, 101))
def test_the_rank_is_the_widest_95_percent_interval(n):
    j = median_ci_rank(n)
    if n < 6:  # [min, max] of 5 covers the median 93.75% of the time: no interval exists
        assert j == 0
        return
    assert 2 * binomial_below(n, j) <= 0.05  # coverage of [x_(j), x_(n+1-j)] >= 95%
    assert 2 * binomial_below(n, j + 1) > 0.05  # and one rank further in would not be


def test_known_ranks_and_the_normal_approximation_beyond_100():
    assert [median_ci_rank(n) for n in (6, 9, 20, 100)] == [1, 2, 6, 40]
    for n in (101, 500, 5000):  # within one rank of the exact one
        j = median_ci_rank(n)
        assert 2 * binomial_below(n, j) <= 0.05 and 2 * binomial_below(n, j + 2) > 0.05


def test_the_interval_covers_the_median_95_percent_of_the_time():
    rnd = random.Random(7)
    for n in (9, 30):
        j, hits, trials = median_ci_rank(n), 0, 4000
        for _ in range(trials):  # a skewed distribution with a known median (ln 2)
            s = sorted(rnd.expovariate(1.0) for _ in range(n))
            hits += s[j - 1] <= math.log(2) <= s[n - j]
        assert hits / trials >= 0.94, (n, hits / trials)


def test_halfwidth_of_known_samples():
    s = [0.98, 0.99, 1.0, 1.0, 1.0, 1.01, 1.02, 1.03, 9.0]  # n 9: ranks 2 and 8
    assert median_halfwidth(s) == pytest.approx((1.03 - 0.99) / 2 / 1.0)
    assert median_halfwidth([1.0] * 5) == math.inf
    assert median_halfwidth([0.0] * 10) == math.inf
    assert Timing.from_samples(s, 1, 0.02).converged is False
    assert Timing.from_samples(s, 1, 0.03).converged is True
    few = Timing.from_samples([1.0] * 5, 1, 0.02)  # kept as None: an Outcome is strict JSON
    assert few.median_halfwidth is None and not few.converged


def test_the_harness_stops_where_the_rule_says(dgemm, fast):
    """The harness's C copy of the rule against the Python one, on its own reported samples: it
    stopped at the first call count from min_samples on where the median was precise enough,
    or at a cap."""
    from perfgym import evaluate
    cfg = fast.replace(max_samples=60, max_time=3.0, min_samples=5, median_precision=0.01)
    seen_stop = False
    for n in (48, 64, 80):
        o = evaluate(dgemm, dgemm.baseline.read_text(), {"M": n, "N": n, "K": n}, cfg)
        assert o.ok, o.message
        reported = o.parent_check["reported_samples"]
        before = [median_halfwidth(sorted(reported[:k])) for k in range(5, len(reported))]
        # (the samples come back printed to 10 digits: a rounding's worth of slack)
        assert all(h > 0.01 * (1 - 1e-6) for h in before)  # it did not run past a stop
        if len(reported) < 60 and sum(reported) < 3.0:  # no cap ended it: the rule did
            assert median_halfwidth(sorted(reported)) <= 0.01 * (1 + 1e-6)
            seen_stop = True
    assert seen_stop
