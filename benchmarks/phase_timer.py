"""Timing the phases of one evaluation by wrapping, for the length of a run, the functions that
do them (perfgym itself is unchanged). Shared by eval_phases.py and torch_phases.py."""
from __future__ import annotations

import importlib
import threading
import time
from collections import defaultdict
from contextlib import ExitStack


class Phases:
    """Seconds per phase, summed over the calls of one evaluation. A wrapped call counts only
    when no other wrapped call is under way in its thread (no phase counted twice), unless it
    is `nested`: then it counts wherever it runs (a part of other phases)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.local = threading.local()  # per thread: some phases run in threads of their own
        self.lock = threading.Lock()

    @property
    def depth(self) -> int:
        return getattr(self.local, "depth", 0)

    def wrap(self, fn, label: str, nested: bool = False):
        def timed(*args, **kwargs):
            if not nested and self.depth:
                return fn(*args, **kwargs)
            if not nested:
                self.local.depth = 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with self.lock:
                    self.seconds[label] += time.perf_counter() - start
                if not nested:
                    self.local.depth = 0
        return timed


def owner_of(path: str):
    """The module, or the class in a module, that `path` names ("pkg.mod" or "pkg.mod.Class")."""
    parent, last = path.rsplit(".", 1)
    if last.lstrip("_")[:1].isupper():
        return getattr(importlib.import_module(parent), last)
    return importlib.import_module(path)


def wrap_each(phases: Phases, patch, entries, nested: bool = False) -> None:
    """Wrap each (owner path, attribute, phase) of `entries` for the phase it does."""
    for path, attr, label in entries:
        owner = owner_of(path)
        patch(owner, attr, phases.wrap(getattr(owner, attr), label, nested))


def patcher(undo: ExitStack):
    """patch(owner, name, value): set an attribute until `undo` closes."""
    def patch(owner, name, value):
        old = getattr(owner, name)
        setattr(owner, name, value)
        undo.callback(setattr, owner, name, old)
    return patch
