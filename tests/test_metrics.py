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


# --- the learning experiment's statistics ---------------------------------------------------

def test_power_analysis_matches_the_normal_formula_and_its_inverse():
    from perfgym.metrics import detectable_gain, samples_for_power
    # 2 * (1.96 + 0.8416)^2 * (0.5 / (0.16 * 0.45))^2 = 757.0...
    assert samples_for_power(0.45, 0.5, 0.16) == 758
    # more spread, or a smaller gain, needs more samples
    assert samples_for_power(0.45, 1.0, 0.16) > samples_for_power(0.45, 0.5, 0.16)
    assert samples_for_power(0.45, 0.5, 0.08) > samples_for_power(0.45, 0.5, 0.16)
    assert abs(detectable_gain(0.45, 0.5, 758) - 0.16) < 0.001
    with pytest.raises(ValueError):
        samples_for_power(0.0, 0.5, 0.16)


def test_arm_mean_weighs_tasks_and_seeds_alike():
    from perfgym.metrics import arm_mean
    cells = {(1, "a"): [1.0] * 10, (2, "a"): [0.0] * 2, (1, "b"): [0.5], (2, "b"): [0.5]}
    assert arm_mean(cells) == pytest.approx(((1.0 + 0.0) / 2 + 0.5) / 2)


def _cells(rate, seeds=(1, 2, 3), tasks="abcde", n=60, rng_seed=0):
    rng = random.Random(rng_seed)
    return {(s, t): [float(rng.random() < rate) for _ in range(n)] for s in seeds for t in tasks}


def test_bootstrap_interval_covers_a_null_and_excludes_a_large_gain():
    from perfgym.metrics import bootstrap_gain
    control = _cells(0.4, rng_seed=1)
    same = _cells(0.4, rng_seed=2)  # the same policy, other samples
    gain, low, high = bootstrap_gain(same, control, reps=800)
    assert low < 0 < high and high - low < 0.6
    better = _cells(0.7, rng_seed=3)
    gain, low, high = bootstrap_gain(better, control, reps=800)
    assert 0.5 < gain < 1.0 and low > 0.3


def test_bootstrap_puts_the_seeds_spread_into_the_interval():
    """One seed that learned and two that did not: the point gain is positive, but the
    interval, which draws seeds again, reaches down to no gain."""
    from perfgym.metrics import bootstrap_gain
    control = _cells(0.4, rng_seed=4)
    trained = _cells(0.4, rng_seed=5)
    trained.update({(1, t): [1.0] * 60 for t in "abcde"})
    gain, low, high = bootstrap_gain(trained, control, reps=800)
    assert gain > 0.3 and low < 0.05


def test_bootstrap_gives_the_difference_too_and_an_unbounded_gain_over_nothing():
    from perfgym.metrics import bootstrap
    # one success in 40 per cell: in about 13% of replicates the control draws none at all
    control = {(1, t): [0.0] * 39 + [1.0] for t in "ab"}  # mean 0.025
    trained = {(1, t): [0.0] * 20 + [1.0] * 20 for t in "ab"}  # mean 0.5
    b = bootstrap(trained, control, reps=800)
    assert b["diff"] == pytest.approx(0.475) and 0.3 < b["diff_low"] < 0.475 < b["diff_high"]
    assert b["gain"] == pytest.approx(19.0) and b["gain_high"] == float("inf")
    assert b["gain_low"] > 3

