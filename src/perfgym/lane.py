"""The benchmark lane: timing runs are exclusive on a machine; builds share it.

A reader-writer lock: builds take it shared (many at once), a timing run takes it exclusive
(nothing else of ours runs while a kernel is timed). Waiting timing runs go first, so a queue of
builds cannot starve them. An flock on a file in the cache directory extends the rule to every
perfgym process on the machine.
"""
from __future__ import annotations

import fcntl
import threading
from contextlib import contextmanager
from typing import Iterator

from .paths import cache_dir


class Lane:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            with _flock(fcntl.LOCK_SH):
                yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            with _flock(fcntl.LOCK_EX):
                yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


@contextmanager
def _flock(mode: int) -> Iterator[None]:
    with open(cache_dir() / "bench.lock", "a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


LANE = Lane()  # one per process; the flock joins processes
