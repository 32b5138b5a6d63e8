"""Metrics for sets of generated kernels, with the exact (unbiased) definitions.

Equations 1-3 of "Towards Automated Kernel Generation in the Era of LLMs: A Survey", for n samples of
which c are correct:
    pass@k       = 1 - C(n-c, k) / C(n, k)
    speedup@k    = sum_j C(j-1, k-1) / C(n, k) * s_(j)  with s_(1) <= ... <= s_(n) the speedups
                   sorted ascending (a failed sample counts as speedup 0), i.e. the expected best
                   speedup among k samples drawn without replacement: s_(j) is the best of a
                   k-subset exactly when the other k-1 come from the j-1 smaller ones.
                   (Sorting runtimes ascending instead puts the weight on the slowest samples,
                   a mistake in a known public implementation.)
    efficiency@k = the same over T_base / (m * T_j,m), for m computing resources.
Plus fast_p (correct and faster than p x the baseline), perf@k (best of k against the expert
kernel) and the geometric-mean speedup.
"""
from __future__ import annotations

import math
import statistics
from math import comb
from typing import Iterable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def best_of_k(values: Sequence[float], k: int) -> float:
    """Expected maximum of `values` over a uniformly random k-subset (exact)."""
    n = len(values)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n (n={n}, k={k})")
    ordered = sorted(values)
    total = comb(n, k)
    return sum(comb(j - 1, k - 1) * v for j, v in enumerate(ordered, start=1)) / total


def speedup_at_k(base_time: float, times: Sequence[float | None], k: int) -> float:
    """`times`: each sample's runtime, None (or inf) for a sample that failed."""
    return best_of_k([_ratio(base_time, t) for t in times], k)


def efficiency_at_k(base_time: float, times: Sequence[float | None], m: int, k: int) -> float:
    """`times`: runtimes with m computing resources (threads, cores, SMs)."""
    return best_of_k([_ratio(base_time, t) / m for t in times], k)


def perf_at_k(expert_time: float, times: Sequence[float | None], k: int) -> float:
    """How close the best of k samples gets to the expert kernel (1.0 = as fast)."""
    return speedup_at_k(expert_time, times, k)


def fast_p(results: Iterable[tuple[bool, float | None]], p: float) -> float:
    """Share of problems whose kernel is correct and more than p times faster than the
    baseline: results are (correct, speedup), one per problem."""
    results = list(results)
    if not results:
        raise ValueError("fast_p needs at least one problem")
    return sum(1 for ok, s in results if ok and s is not None and s > p) / len(results)


def geomean(values: Iterable[float]) -> float:
    vals = list(values)
    if not vals or any(v <= 0 for v in vals):
        raise ValueError("geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _ratio(base: float, t: float | None) -> float:
    return 0.0 if t is None or not math.isfinite(t) or t <= 0 else base / t


# --- the learning experiment's statistics ---------------------------------------------------

def samples_for_power(mean: float, sd: float, relative_gain: float, alpha: float = 0.05,
                      power: float = 0.8) -> int:
    """Samples per arm for a two-sided test at level `alpha` to see a gain of `relative_gain`
    times `mean` with probability `power`, for a per-sample standard deviation `sd` (normal
    approximation, equal arms): n = 2 (z_{1-alpha/2} + z_power)^2 sd^2 / delta^2."""
    from statistics import NormalDist
    if mean <= 0 or relative_gain <= 0:
        raise ValueError("the power analysis needs a positive mean and gain")
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    delta = relative_gain * mean
    return math.ceil(2 * (z * sd / delta) ** 2)


def detectable_gain(mean: float, sd: float, n: int, alpha: float = 0.05,
                    power: float = 0.8) -> float:
    """The relative gain that `n` samples per arm see with that power (the inverse above)."""
    from statistics import NormalDist
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return z * sd * math.sqrt(2 / n) / mean


def arm_mean(cells: dict[tuple[int, str], Sequence[float]]) -> float:
    """An arm's measure: the mean over tasks of the mean over seeds of each (seed, task)
    cell's mean, so every task and every seed weighs the same."""
    tasks = sorted({t for _, t in cells})
    per_task = []
    for t in tasks:
        seeds = [statistics.fmean(v) for (s, tt), v in cells.items() if tt == t and v]
        per_task.append(statistics.fmean(seeds))
    return statistics.fmean(per_task)


def bootstrap_gain(trained: dict[tuple[int, str], Sequence[float]],
                   control: dict[tuple[int, str], Sequence[float]], reps: int = 4000,
                   level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(gain, low, high): `bootstrap`'s relative gain and its interval."""
    b = bootstrap(trained, control, reps, level, seed)
    return b["gain"], b["gain_low"], b["gain_high"]


def bootstrap(trained: dict[tuple[int, str], Sequence[float]],
              control: dict[tuple[int, str], Sequence[float]], reps: int = 4000,
              level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """The relative gain arm_mean(trained) / arm_mean(control) - 1 and the difference
    arm_mean(trained) - arm_mean(control), each with a percentile bootstrap interval,
    stratified: each replicate draws the seeds again (with replacement, the same draw for both
    arms: seed s of the control is the same prompts and sampler seed), then the samples again
    within every (seed, task) cell. Drawing seeds puts the run-to-run spread of training into
    the interval, as rliable's stratified bootstrap does over runs; drawing samples within
    cells puts in the sampling spread. A replicate whose control mean is 0 has an unbounded
    gain: an upper bound of inf says so (the difference is always defined)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    seeds = sorted({s for s, _ in trained})
    tasks = sorted({t for _, t in trained})
    arms = [{k: np.asarray(v, dtype=float) for k, v in arm.items()} for arm in (trained, control)]
    means = np.empty((reps, 2))
    for r in range(reps):
        drawn = rng.choice(seeds, size=len(seeds), replace=True)
        for a, arm in enumerate(arms):
            per_task = []
            for t in tasks:
                per_seed = []
                for s in drawn:
                    v = arm[(s, t)]
                    per_seed.append(v[rng.integers(0, len(v), len(v))].mean())
                per_task.append(np.mean(per_seed))
            means[r, a] = np.mean(per_task)
    with np.errstate(divide="ignore", invalid="ignore"):
        gains = np.where(means[:, 1] > 0, means[:, 0] / means[:, 1] - 1, np.inf)
    diffs = means[:, 0] - means[:, 1]
    q = [(1 - level) / 2, 1 - (1 - level) / 2]
    gain_low, gain_high = np.quantile(gains, q, method="inverted_cdf")  # no inf - inf
    diff_low, diff_high = np.quantile(diffs, q)
    t, c = arm_mean(trained), arm_mean(control)
    return {"gain": t / c - 1 if c > 0 else math.inf, "gain_low": float(gain_low),
            "gain_high": float(gain_high), "diff": t - c, "diff_low": float(diff_low),
            "diff_high": float(diff_high)}
