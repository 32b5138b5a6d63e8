import math

import numpy as np
import pytest

from perfgym.outcome import Outcome, Status, Timing
from perfgym.rewards import SCHEMES, score
from perfgym.verify import compare, reference_outputs, sample_points


def test_reference_is_a_times_b(dgemm):
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 4)), rng.random((4, 5))
    out = reference_outputs(dgemm, {"A": a, "B": b}, {"M": 3, "N": 5, "K": 4})
    assert np.allclose(out["C"], a @ b)


def test_compare_reports_where():
    ref = np.arange(12, dtype=np.float64).reshape(3, 4)
    got = ref.copy()
    got[2, 1] += 1.0
    v = compare("C", got, ref, 1e-6, 1e-9)
    assert not v.ok and "C[2, 1]" in v.where and v.max_error == pytest.approx(1.0)
    assert compare("C", ref.copy(), ref, 1e-6, 1e-9).ok


def test_nan_fails():
    ref = np.ones((2, 2))
    got = ref.copy()
    got[1, 1] = np.nan
    assert not compare("C", got, ref, 1e-6, 1e-9).ok


def test_reordered_sum_passes_a_wrong_one_fails():
    # A parallel reduction reorders additions: tiny differences pass, a real error does not.
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (64, 256)), rng.uniform(-1, 1, (256, 64))
    ref = a @ b
    reordered = sum(a[:, k::4] @ b[k::4, :] for k in range(4))
    assert compare("C", reordered, ref, 1e-6, 1e-9).ok
    wrong = reordered.copy()
    wrong[5, 5] *= 1.0001
    assert not compare("C", wrong, ref, 1e-6, 1e-9).ok


def test_sample_points_are_the_seeds_105():
    rng = np.random.default_rng(0)
    pts = sample_points((256, 256), rng)
    assert {0, 255, 255 * 256, 256 * 256 - 1, 128 * 256 + 128} <= set(pts.tolist())
    assert 100 <= len(pts) <= 105


def outcome(status, gflops=None, speedup=None):
    timing = Timing.from_samples([1.0, 1.0], 1, 0.02) if status is Status.OK else None
    return Outcome(status=status, task="dgemm", sizes={}, gflops=gflops, speedup=speedup,
                   timing=timing)


def test_tiered_reward_is_eq3():
    group = [outcome(s) for s in (Status.FORMAT_ERROR, Status.LIBRARY_VIOLATION,
                                  Status.COMPILE_ERROR, Status.TIMEOUT, Status.RUNTIME_ERROR,
                                  Status.WRONG_ANSWER)] + [outcome(Status.OK, 12.5)]
    assert score("tiered", group) == [-100, -100, -40, -30, -20, -10, 12.5]


def test_group_normalized():
    group = [outcome(Status.OK, 10.0), outcome(Status.OK, 40.0), outcome(Status.WRONG_ANSWER)]
    assert score("group_normalized", group) == [25.0, 100.0, -10.0]
    # the group's best gets exactly 100, whatever its rate (100 * g / g is not always 100)
    assert score("group_normalized", [outcome(Status.OK, 84.4331887563773)]) == [100.0]


def test_weighted_reward_is_seed_001():
    group = [outcome(Status.COMPILE_ERROR), outcome(Status.WRONG_ANSWER),
             outcome(Status.OK, 1.0, 0.5), outcome(Status.OK, 1.0, 2.0)]
    assert score("weighted", group) == pytest.approx([0.0, 0.4, 0.8, 1.0])


def test_log_speedup():
    group = [outcome(Status.OK, 1.0, 4.0), outcome(Status.TIMEOUT)]
    assert score("log_speedup", group) == [2.0, -3.0]


def test_unknown_scheme():
    with pytest.raises(ValueError, match="tiered"):
        score("nope", [])
    assert set(SCHEMES) == {"tiered", "group_normalized", "weighted", "log_speedup", "speed"}


def test_timing_stats():
    t = Timing.from_samples([1.0, 2.0, 3.0, 4.0, 100.0], 2, 0.02)
    assert t.median == 3.0 and t.minimum == 1.0 and math.isclose(t.mean, 22.0)
    # one preemption in ten calls moves the median's interval by one rank, not its width
    t = Timing.from_samples([1.0] * 9 + [50.0], 0, 0.02)
    assert t.cv > 1.0 and t.trimmed_cv == 0.0 and t.median_halfwidth == 0.0 and t.converged
    assert not Timing.from_samples([1.0] * 5, 0, 0.02).converged  # no 95% interval below 6
