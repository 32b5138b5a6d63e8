"""Evaluations a service has under way, by content, and what becomes of them when callers go.

A trainer's HTTP client that times out closes its connection and sends the same request again.
Keyed by a hash of what is judged, the retry joins the evaluation already running rather than
queueing a second one behind it; when every caller of an evaluation has gone, its cancel event
is set, and what has not started timing stops (lane.Cancelled). A finished evaluation leaves
the registry: its outcomes are in the outcome cache, so a later retry is answered from there.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

POLL = 0.25  # seconds between looks at whether a waiting caller is still connected


class CallerGone(Exception):
    """Every caller of the evaluation disconnected before it finished."""


def content_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


@dataclass
class _Job:
    future: Future
    cancel: threading.Event = field(default_factory=threading.Event)
    callers: int = 0


class Inflight:
    def __init__(self, workers: int = 64) -> None:
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="perfgym-serve")
        self.started = 0  # evaluations started (a joined retry starts none)
        self.cancelled = 0  # evaluations whose callers all went

    async def run(self, key: str, work: Callable[[threading.Event], Any],
                  gone: Callable[[], Awaitable[bool]]) -> Any:
        """`work(cancel)`'s result, run in a worker thread once per key at a time; raises
        CallerGone when this caller disconnected first (`gone()` says so)."""
        with self._lock:
            job = self._jobs.get(key)
            new = job is None
            if new:
                cancel = threading.Event()
                job = self._jobs[key] = _Job(self._pool.submit(work, cancel), cancel)
                self.started += 1
            job.callers += 1
        if new:  # (outside the lock: a future already done runs its callback here, at once)
            job.future.add_done_callback(lambda _, k=key, j=job: self._forget(k, j))
        waiting = asyncio.wrap_future(job.future)
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=POLL)
                if done:
                    return waiting.result()
                if await gone():
                    raise CallerGone()
        finally:
            with self._lock:
                job.callers -= 1
                if job.callers == 0 and not job.future.done():
                    job.cancel.set()  # nobody waits: stop what has not started timing
                    self.cancelled += 1
                    self._jobs.pop(key, None)

    def _forget(self, key: str, job: _Job) -> None:
        with self._lock:
            if self._jobs.get(key) is job:
                del self._jobs[key]
