"""Metrics against brute-force enumeration over every k-subset."""
import itertools
import math
import random

import pytest

from perfgym.metrics import (best_of_k, efficiency_at_k, fast_p, geomean, pass_at_k, perf_at_k,
                             speedup_at_k)


def brute_pass(correct, k):
    subsets = list(itertools.combinations(range(len(correct)), k))
    return sum(any(correct[i] for i in s) for s in subsets) / len(subsets)


def brute_best(values, k):
    subsets = list(itertools.combinations(values, k))
    return sum(max(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("seed", range(20))
def test_against_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    correct = [rng.random() < 0.5 for _ in range(n)]
    times = [rng.uniform(0.1, 5.0) if ok else None for ok in correct]
    base = rng.uniform(0.5, 3.0)
    speedups = [base / t if t else 0.0 for t in times]
    for k in range(1, n + 1):
        assert pass_at_k(n, sum(correct), k) == pytest.approx(brute_pass(correct, k))
        assert speedup_at_k(base, times, k) == pytest.approx(brute_best(speedups, k))
        assert efficiency_at_k(base, times, 4, k) == pytest.approx(
            brute_best([s / 4 for s in speedups], k))
        assert perf_at_k(base, times, k) == pytest.approx(brute_best(speedups, k))


def test_speedup_at_k_weights_the_fast_end():
    # One fast sample among slow ones: best-of-n must find it; weighting the wrong end of the
    # sorted runtimes would not.
    times = [10.0, 10.0, 10.0, 1.0]
    assert speedup_at_k(10.0, times, 4) == pytest.approx(10.0)
    assert speedup_at_k(10.0, times, 1) == pytest.approx((1 + 1 + 1 + 10) / 4)


def test_edges():
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 3, 3) == 1.0  # any 3 of 5 include a correct one when only 2 are wrong
    assert best_of_k([3.0], 1) == 3.0
    assert speedup_at_k(1.0, [None, float("inf")], 2) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        best_of_k([1.0, 2.0], 3)


def test_fast_p_and_geomean():
    results = [(True, 2.0), (True, 0.5), (False, 3.0), (True, None)]
    assert fast_p(results, 1.0) == 0.25
    assert fast_p(results, 0.0) == 0.5
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])
    assert math.isclose(geomean([3.0]), 3.0)
