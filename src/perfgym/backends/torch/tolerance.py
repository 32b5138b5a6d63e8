"""When a candidate's tensor counts as the reference's: tolerances that mean something.

The base tolerances are KernelBench's current ones (its `get_tolerance_for_precision`, after
torchbench): atol = rtol = 1e-4 for float32, 1e-2 for float16/bfloat16; exact for integers and
booleans. An output is judged at the reference's dtype (a different dtype is rejected before
any value is read). Absolute tolerance alone lets small outputs pass as anything: a softmax over
16k columns (every value ~6e-5) passes atol 1e-4 as all zeros. So each reference output is
tried against an all-zero and a constant answer first; where either would pass, the absolute
tolerance shrinks to rtol x the output's mean magnitude, a tolerance relative to its scale.
(An output that does not depend on the inputs at all is the task's fault, not the tolerance's:
the session refuses such a task, `Session.correctness`.)
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
    flat = ref.reshape(-1)
    total = count = 0
    for i in range(0, flat.size, CHUNK):
        part = np.abs(flat[i:i + CHUNK].astype(np.float64))
        part = part[np.isfinite(part)]
        total, count = total + float(part.sum()), count + part.size
    return Judge(tol, tol * total / count if count else 0.0, tightened=True)


CHUNK = 1 << 24  # elements per step: temporaries stay small for outputs of any size


def _trivially_passes(ref: np.ndarray, judge: Judge) -> bool:
    """Would an all-zero answer, or the output's mean everywhere, pass? (|c - r| <= atol +
    rtol |r| for every element r, worked out chunk by chunk)."""
    flat = ref.reshape(-1)
    if flat.size == 0:
        return False
    total, count = 0.0, 0
    for i in range(0, flat.size, CHUNK):
        part = flat[i:i + CHUNK].astype(np.float64)
        part = part[np.isfinite(part)]
        total, count = total + float(part.sum()), count + part.size
    mean = total / count if count else 0.0
    for c in (0.0, mean):
        if all(np.all(np.abs(c - part) <= judge.atol + judge.rtol * np.abs(part))
               for part in (flat[i:i + CHUNK].astype(np.float64)
                            for i in range(0, flat.size, CHUNK))):
            return True
    return False


def mismatches(got: np.ndarray, want: np.ndarray, judge: Judge) -> tuple[int, int]:
    """(how many elements are off, the flat index of the first), for flat arrays."""
    count, first = 0, -1
    for i in range(0, got.size, CHUNK):
        g, w = got[i:i + CHUNK], want[i:i + CHUNK]
        if judge.rtol == judge.atol == 0:
            bad = g != w
        else:
            if g.dtype == np.float16:  # a difference of two halves can overflow
                g, w = g.astype(np.float32), w.astype(np.float32)
            # np.isclose's rule (equal NaNs and equal infinities agree), a few times faster
            with np.errstate(invalid="ignore", over="ignore"):
                bad = ~(np.abs(g - w) <= judge.atol + judge.rtol * np.abs(w))
            if bad.any():
                bad &= ~((g == w) | (np.isnan(g) & np.isnan(w)))
        n = int(np.count_nonzero(bad))
        if n and first < 0:
            first = i + int(np.argmax(bad))
        count += n
    return count, first
