"""Compare a kernel's outputs with the task's NumPy reference."""
from __future__ import annotations

import builtins
import ctypes
import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from .tasks import Task, TaskError, format_size, load_python_attr

SAMPLED_RANDOM_POINTS = 100  # as the online-RL paper: 4 corners, centre and 100 random positions


@dataclass
class Verdict:
    ok: bool
    max_error: float = 0.0  # largest |got - expected| among checked elements
    where: str = ""  # e.g. "C[17, 3] = 1.25 but expected 3.5"


class ReferenceTooSlow(TaskError):
    """The task's reference did not finish in its time limit at the size asked for: a size the
    task cannot check, not the candidate's fault."""


class _Deadline(Exception):
    """Raised inside the reference's thread when its caller stopped waiting."""


# (task, size) -> the limit its reference last ran past in this process: a later evaluation at
# that size with that limit or a shorter one is told at once. An evaluation computes the
# reference up to four times (two input sets, ahead of the check call and in the check), a
# batch evaluates the baseline and each kernel: without this, `perfgym eval --task jacobi2d
# --size N=3,M=3,T=100000000` took 226 s to say its 32 s bound was passed.
# A size is remembered for TOO_SLOW_SECONDS (a long-lived service must not refuse a size for
# good because its reference once ran past the bound on a busy machine).
_TOO_SLOW: dict[tuple, tuple[float, float]] = {}  # -> (the limit, when)
_TOO_SLOW_MOST = 1024  # sizes remembered (the oldest forgotten first)
TOO_SLOW_SECONDS = 600.0
_too_slow_lock = threading.Lock()


def _size_key(task: Task, size: dict[str, int]) -> tuple:
    return (task.name, str(task.directory), task.spec_hash, tuple(sorted(size.items())))


def _too_slow(task: Task, size: dict[str, int], limit: float) -> ReferenceTooSlow:
    return ReferenceTooSlow(f"the reference took longer than {limit:g} s at "
                            f"{format_size(size)}: choose smaller sizes")


def reference_outputs(task: Task, inputs: dict[str, np.ndarray], size: dict[str, int],
                      limit: float | None = None) -> dict[str, np.ndarray]:
    """The task's reference answer for `inputs`, as name -> array for every output. With a
    `limit` (seconds) it runs in a thread the caller waits for that long at most: past it,
    ReferenceTooSlow, and the thread is stopped at its next Python step (a reference's loop;
    one long NumPy call runs to its end first, beside the caller). A thread and not a forked
    process: the reference's inputs and outputs stay where they are, where a child would cost
    a copy of its outputs (300 ms for prefix_sum's 32 MB). A size whose reference ran past
    `limit` or a longer one before, in this process, raises at once (_TOO_SLOW)."""
    if limit is None:
        return _reference(task, inputs, size)
    key = _size_key(task, size)
    with _too_slow_lock:
        passed, when = _TOO_SLOW.get(key, (0.0, -math.inf))
    if passed >= limit and time.monotonic() - when < TOO_SLOW_SECONDS:
        raise _too_slow(task, size, limit)
    box: dict = {}

    def run() -> None:
        try:
            box["answer"] = _reference(task, inputs, size)
        except _Deadline:
            pass
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=run, name="perfgym-reference", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                                   ctypes.py_object(_Deadline))
        with _too_slow_lock:
            _TOO_SLOW.pop(key, None)  # (re-inserted: the newest)
            _TOO_SLOW[key] = (limit, time.monotonic())
            while len(_TOO_SLOW) > _TOO_SLOW_MOST:
                del _TOO_SLOW[next(iter(_TOO_SLOW))]
        raise _too_slow(task, size, limit)
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, TaskError):  # already says what is wrong with the task
            raise exc
        raise TaskError(f"the task's reference failed at {format_size(size)}: "
                        f"{type(exc).__name__}: {exc}") from exc
    return box["answer"]


def _reference(task: Task, inputs: dict[str, np.ndarray],
               size: dict[str, int]) -> dict[str, np.ndarray]:
    outputs = task.outputs
    # an in-place array is given as a copy: a reference that works in place must not change
    # the inputs the next check is made from
    inputs = {k: v.copy() if task.arrays[k].role == "inout" else v for k, v in inputs.items()}
    if task.reference.endswith(".py"):
        fn = load_python_attr(str(task.directory / task.reference), "reference")
        result = fn(**inputs, **size, **task.scalars)
    else:
        namespace = {"np": np, "numpy": np, **inputs, **size, **task.scalars}
        # the task author's code, trusted as reference.py is; with builtins, because NumPy's
        # array methods (x.sum(), x.mean()) import inside the caller's frame
        result = eval(task.reference, {"__builtins__": builtins}, namespace)
    if isinstance(result, dict):
        return {k: np.asarray(v) for k, v in result.items()}
    if isinstance(result, tuple):
        return dict(zip(outputs, (np.asarray(r) for r in result)))
    return {outputs[0]: np.asarray(result)}


def sample_points(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Flat indices: the corners, the centre and 100 random positions (unknown to the kernel)."""
    total = int(np.prod(shape))
    corners = []
    if len(shape) == 2:
        m, n = shape
        corners = [(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1), (m // 2, n // 2)]
        corners = [i * n + j for i, j in corners]
    else:
        corners = [0, total - 1, total // 2]
    rand = rng.integers(0, total, size=SAMPLED_RANDOM_POINTS)
    return np.unique(np.concatenate([np.array(corners, dtype=np.int64), rand]))


# compare() works through the arrays in blocks of this many elements: a whole-array pass made a
# dozen temporaries the size of the output (transpose's 128 MB: 1.27 s a compare, five compares
# an evaluation); in blocks of 16K elements 0.21 s, and 16M contiguous doubles 0.07 s (larger
# blocks measured slower: their temporaries leave the L2 cache).
BLOCK_ELEMENTS = 1 << 14


def compare(name: str, got: np.ndarray, expected: np.ndarray, rtol: float, atol: float,
            points: np.ndarray | None = None, scale: str = "element") -> Verdict:
    """Pass when every checked element satisfies |got - expected| <= atol + rtol * |expected|
    (`scale` "array": rtol * the largest |expected| of the whole output). `points`: the flat
    indices to check (sampled verification), else every element."""
    if got.dtype.names:  # an array of structs: each field is an array of its own
        verdicts = [compare(f"{name}.{field}", np.ascontiguousarray(got[field]),
                            np.asarray(expected)[field], rtol, atol, points, scale)
                    for field in got.dtype.names]
        return next((v for v in verdicts if not v.ok),
                    Verdict(True, max(v.max_error for v in verdicts)))
    expected = np.asarray(expected)
    # as bytes: an unwritten output's poison byte (0x80-0xFF) is neither true nor false
    if got.dtype.kind == "b":
        got, expected = got.view(np.uint8), expected.astype(bool).astype(np.uint8)
    if got.size != expected.size:
        return Verdict(False, float("inf"), f"{name} has {got.size} elements, expected "
                       f"{expected.size}")
    if expected.shape != got.shape:  # the same elements in C order (a reference's 1-d answer)
        expected = expected.reshape(got.shape)
    wide = np.complex128 if got.dtype.kind == "c" else np.float64
    largest = _largest_magnitude(expected, wide) if scale == "array" else 0.0
    found = _Found()
    for start, g, e in _blocks(got, expected, points):
        found.add(start, g, e.astype(got.dtype, copy=False), rtol, atol, scale, largest, wide)
    if found.bad == 0:
        return Verdict(True, found.max_error)
    flat = int(points[found.worst] if points is not None else found.worst)
    pos = ", ".join(str(int(i)) for i in np.unravel_index(flat, got.shape or (1,)))
    where = f"{name}[{pos}]" if got.ndim else name  # a returned value has no index
    # the difference and the tolerance, and every digit when two values would print alike
    shown, want = _num(found.got), _num(found.want)
    if shown == want:
        shown, want = _num(found.got, 17), _num(found.want, 17)
    checked = len(points) if points is not None else got.size
    return Verdict(False, found.max_error, f"{where} = {shown} but expected {want} "
                   f"(off by {_num(found.err, 3)}, allowed {_num(found.bound, 3)}; "
                   f"{found.bad} of {checked} checked elements wrong)")


def _blocks(got: np.ndarray, expected: np.ndarray, points: np.ndarray | None):
    """(index of the block's first checked element, got's block, expected's block), both flat,
    in C order. Blocks follow the leading axis, so a transposed reference is read a block of
    rows at a time, a cache-friendly stride, never copied whole."""
    if points is not None:
        yield 0, got.reshape(-1)[points], expected.reshape(-1)[points] \
            if expected.flags.c_contiguous else expected.flat[points]
        return
    if got.ndim <= 1:
        g, e = got.reshape(-1), expected.reshape(-1)
        for k in range(0, g.size, BLOCK_ELEMENTS):
            yield k, g[k:k + BLOCK_ELEMENTS], e[k:k + BLOCK_ELEMENTS]
        return
    row = int(np.prod(got.shape[1:]))
    rows = max(1, BLOCK_ELEMENTS // max(row, 1))
    for r in range(0, got.shape[0], rows):
        yield r * row, got[r:r + rows].reshape(-1), expected[r:r + rows].reshape(-1)


def _largest_magnitude(expected: np.ndarray, wide) -> float:
    """The largest finite |expected| of the whole output (sampled or not), block by block."""
    largest = 0.0
    for _, _, e in _blocks(expected, expected, None):
        full = np.abs(e.astype(wide, copy=False))
        largest = max(largest, float(full[np.isfinite(full)].max(initial=0.0)))
    return largest


class _Found:
    """What compare() has seen so far: the largest error, the count of wrong elements and the
    worst of them (the most over its bound; the first such, in C order)."""

    def __init__(self) -> None:
        self.max_error, self.bad, self.worst, self.excess = 0.0, 0, -1, -np.inf
        self.got = self.want = self.err = self.bound = None

    def add(self, start: int, g: np.ndarray, e: np.ndarray, rtol: float, atol: float,
            scale: str, largest: float, wide) -> None:
        if g.dtype.kind in "iu":
            bad = np.nonzero(g != e)[0]
            err = np.abs(g.astype(np.float64) - e.astype(np.float64))
            bound = np.zeros_like(err)
        else:
            g64, e64 = g.astype(wide, copy=False), e.astype(wide, copy=False)
            with np.errstate(invalid="ignore"):  # inf - inf: NaN, judged below
                err = np.abs(g64 - e64)
            if scale == "array":
                bound = np.full(e64.shape, atol + rtol * largest)
            else:
                bound = atol + rtol * np.abs(e64)
            with np.errstate(invalid="ignore"):
                within = bool(np.all(err <= bound))  # (NaN is never within)
            if within:  # the usual block: nothing to look for (no NaN; an inf only where the
                # bound is inf too, which the full test below passes as well)
                if err.size:
                    self.max_error = max(self.max_error, float(err.max()))
                return
            finite_ok = np.isfinite(g64) | ~np.isfinite(e64)
            with np.errstate(invalid="ignore"):
                bad = np.nonzero(~finite_ok | (err > bound) & np.isfinite(e64))[0]
            err = np.where(np.isfinite(err), err, np.inf)
        if err.size:
            self.max_error = max(self.max_error, float(err.max()))
        if bad.size == 0:
            return
        self.bad += int(bad.size)
        over = np.where(np.isfinite(err[bad]), err[bad] - bound[bad], np.inf)
        k = int(np.argmax(over))
        if over[k] > self.excess:  # strictly: an earlier block keeps a tie
            i = bad[k]
            self.excess, self.worst = over[k], start + int(i)
            self.got, self.want, self.err, self.bound = g[i], e[i], err[i], bound[i]


def _num(x, digits: int = 10) -> str:
    floating = isinstance(x, (float, complex)) or np.issubdtype(type(x), np.inexact)
    return f"{x:.{digits}g}" if floating else str(x)
