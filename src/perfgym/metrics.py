"""Metrics for sets of generated kernels, with the exact (unbiased) definitions.

Survey 002, equations 1-3, for n samples of which c are correct:
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
