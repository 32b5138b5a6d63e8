"""The harness's one-element input changes, repeated by the parent (harness.c: perturb_inputs,
change_next), so that a late timed call's answer is checked against inputs the parent worked
out itself.

Before every dry round, warm-up and timed call the harness changes one element of each
perturbable input, drawn from a stream of its own: splitmix64 from the bitwise complement of
the manifest's seed, which the parent wrote. Nothing else draws from that stream, so the
changes depend on the seed and the number of calls alone, and any tampering with them in the
candidate's process makes the inputs it was given differ from the ones worked out here."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ...tasks import Task
from .build import perturbation

MASK = (1 << 64) - 1
DRY_ROUNDS = 9  # harness.c's: their changes are drawn, then undone (set 1 is read again)


class ChangeStream:
    """harness.c's change_next and change_uniform."""

    def __init__(self, seed: int) -> None:
        self.state = ~seed & MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniform(self) -> float:
        return (self.next() >> 11) * 2.0 ** -53


@dataclass(frozen=True)
class Changed:
    """An input the harness changes: its name, the manifest's mode (1, 2 or 3) and bounds."""
    name: str
    mode: int
    low: float
    high: float
    count: int


def changed_inputs(task: Task, size: dict[str, int], order: list[str],
                   fresh: bool) -> list[Changed]:
    """The inputs perturb_inputs changes, in the harness's order (the pointer order)."""
    out = []
    for name in order:
        if task.arrays[name].role == "out":
            continue
        mode, low, high = perturbation(task, size, name, fresh)
        count = int(np.prod(task.shape(name, size)))
        if mode and count:
            out.append(Changed(name, mode, float(low), float(high), count))
    return out


def undo_changes(undo: list) -> None:
    """Put back what late_call_inputs changed (its `undo` list)."""
    for real, idx, old in reversed(undo):
        real[idx] = old
    undo.clear()


def _change(stream: ChangeStream, c: Changed, array: np.ndarray | None,
            undo: list | None = None) -> None:
    """Draw one change of `c` (as perturb_inputs does) and make it in `array` (flat), unless
    None (a change drawn and later undone by the harness); `undo` gets what it replaced."""
    u = c.low + (c.high - c.low) * stream.uniform()
    real = array
    if array is not None and array.dtype.kind == "c":  # (a complex one: its real part)
        real = array.view(array.real.dtype)[::2]
    if c.mode == 2:
        n = int(math.floor(math.sqrt(c.count) + 0.5))
        d = stream.next() % n
        if real is not None:
            _store(real, d * n + d, float(real[d * n + d]) + u, undo)
        return
    idx = stream.next() % c.count
    if real is not None:
        _store(real, idx, u if real.dtype.kind == "f" else math.floor(u), undo)


def _store(real: np.ndarray, idx: int, v: float, undo: list | None) -> None:
    """harness.c's store: a real rounded to its width, an integer cut toward zero; an
    integer of another width than 1, 4 or 8 bytes left as is."""
    if undo is not None:
        undo.append((real, idx, real[idx].copy()))
    if real.dtype.kind == "f":
        real[idx] = v
    elif real.dtype.itemsize in (1, 4, 8):
        real[idx] = int(v)


def late_call_inputs(seed: int, changed: list[Changed], base: dict[str, np.ndarray],
                     warmups: int, probes: set[int], after: int | None, late: list[int],
                     undo: list | None = None) -> Iterator[int]:
    """Each k in `late`, in order, once `base` holds timed call k's changed inputs. `base` holds
    each changed input (flat, writable: it is changed in place) as it was before the first
    change made here: with `after` None, input set 1 (the warm-ups' and timed calls' changes
    are made); else the inputs of timed call `after`, the last probe (only later calls'
    changes are made). `probes`: the timed calls whose mode-3 inputs were drawn anew (no
    change drawn for those). They change again after the next step: use them first.
    `undo` gets each element's value before its change (restore them in reverse order)."""
    stream = ChangeStream(seed)
    wanted = sorted(set(late))
    if not wanted:
        return
    calls = [(None, False)] * DRY_ROUNDS + [(-1, False)] * warmups
    calls += [(k, k in probes) for k in range(wanted[-1] + 1)]
    for k, probing in calls:
        applied = k is not None and (after is None or k > after)  # (-1: a warm-up)
        for c in changed:
            if c.mode == 3 and probing:
                continue  # every element drawn anew (from the other stream): no change drawn
            _change(stream, c, base[c.name] if applied else None, undo)
        if k is not None and k >= 0 and k == wanted[0]:
            yield k
            wanted.pop(0)
            if not wanted:
                return
