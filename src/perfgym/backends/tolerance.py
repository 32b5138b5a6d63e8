"""When a candidate's tensor counts as the reference's: tolerances that mean something.

The base tolerances are KernelBench's current ones (its `get_tolerance_for_precision`, after
torchbench): atol = rtol = 1e-4 for float32, 1e-2 for float16/bfloat16; exact for integers and
booleans. An output is judged at the reference's dtype (a different dtype is rejected before
any value is read). Absolute tolerance alone lets small outputs pass as anything: a softmax over
16k columns (every value ~6e-5) passes atol 1e-4 as all zeros. So each reference output is
tried against an all-zero and a constant answer first; where either would pass, the absolute
tolerance shrinks to rtol x the output's mean magnitude, a tolerance relative to its scale.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KERNELBENCH = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2, "float64": 1e-7}


@dataclass(frozen=True)
class Judge:
    rtol: float
    atol: float
    tightened: bool = False  # the absolute tolerance was scaled to the output's magnitude
    degenerate: bool = False  # even the tightened tolerance passes a constant: a constant task

    def describe(self) -> str:
        if self.rtol == self.atol == 0:
            return "exact"
        note = ", scaled to the output's magnitude" if self.tightened else ""
        return f"rtol {self.rtol:g}, atol {self.atol:.3g}{note}"


def judge_for(ref: np.ndarray, dtype: str) -> Judge:
    if dtype not in KERNELBENCH:
        return Judge(0.0, 0.0)
    tol = KERNELBENCH[dtype]
    judge = Judge(tol, tol)
    if not _trivially_passes(ref, judge):
        return judge
    finite = np.abs(ref[np.isfinite(ref)], dtype=np.float64)
    scaled = Judge(tol, tol * float(finite.mean()) if finite.size else 0.0, tightened=True)
    return Judge(scaled.rtol, scaled.atol, True, _trivially_passes(ref, scaled))


def _trivially_passes(ref: np.ndarray, judge: Judge) -> bool:
    if ref.size == 0:
        return False
    mean = float(np.nanmean(ref.astype(np.float64))) if np.isfinite(ref).any() else 0.0
    return any(not mismatches(np.full(ref.shape, c, np.float64).reshape(-1), ref.reshape(-1),
                              judge)[0] for c in (0.0, mean))


def mismatches(got: np.ndarray, want: np.ndarray, judge: Judge) -> tuple[int, int]:
    """(how many elements are off, the flat index of the first)."""
    if judge.rtol == judge.atol == 0:
        bad = got != want
    else:
        g, w = got.astype(np.float64, copy=False), want.astype(np.float64, copy=False)
        bad = ~np.isclose(g, w, rtol=judge.rtol, atol=judge.atol, equal_nan=True)
    count = int(np.count_nonzero(bad))
    return count, int(np.argmax(bad)) if count else -1
