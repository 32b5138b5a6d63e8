"""Problem and reference workers kept alive through a batch of evaluations.

These two workers run the task's code only: the candidate never talks to them (the parent
forwards the problem worker's inputs to both sides, and the candidate's outputs come back to
the parent alone), so one pair can serve every candidate of a task in a batch. Each of them
costs a torch import, about a second of a 2-core machine's CPU, per candidate otherwise. The
candidate's own worker is always fresh.

A pair goes back to the pool only if, after its session, both workers answer a "ping" with
the nonce the parent sent, at once: a reply left unread, or a call still running, from an
exchange the session broke off (a timeout, a failure) comes before the pong, and the pair is
closed instead. So the next session finds the pipes empty and the workers idle. A pair is
retired before its sandbox's wall limit could end it inside a session. The pool also holds
the batch's worker templates (template.py), from which candidates' and replayers' workers
are forked. A "faster" finding is
replicated in fresh workers, never in a pooled pair (protocol.CPU_REPLICATES): the bias a
pair of processes carries is what the replicate is there to rule out.
"""
from __future__ import annotations

import hashlib
import secrets
import shutil
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ... import sandbox
from .channel import Worker, WorkerDied, WorkerTimeout
from .template import Template, TemplateUnavailable

LIFETIME = 900.0  # wall seconds a pooled worker may live (its sandbox's limit)
KEEP = 2  # idle pairs kept at most (one per task key): each holds its task's reference model
PING_SECONDS = 2.0  # an idle worker answers a ping in milliseconds


@dataclass
class Pair:
    problem: Worker
    reference: Worker
    dirs: list[Path]
    shrunk: dict
    started: float

    def usable_for(self, seconds: float) -> bool:
        """Whether both workers can serve a session of `seconds` before their wall limit."""
        return time.monotonic() + seconds < self.started + LIFETIME - 5

    def idle(self) -> bool:
        """Both workers answer a ping with its nonce, first thing, within PING_SECONDS."""
        nonce = secrets.token_hex(8)
        if not (self.problem.usable and self.reference.usable):
            return False
        try:
            for w in (self.problem, self.reference):
                w.deadline = time.monotonic() + PING_SECONDS
                if w.request({"op": "ping", "nonce": nonce}) != {"pong": nonce, "tensors": []}:
                    return False
        except (WorkerDied, WorkerTimeout, OSError):
            return False
        return True

    def close(self) -> None:
        for w in (self.problem, self.reference):
            w.ask_to_quit()
        for w in (self.problem, self.reference):
            w.close()
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)


def pair_key(task, device: str, config) -> tuple:
    """What the two workers' behaviour depends on: the problem file, the device, the input
    budget that shrinks it and the threads it runs on."""
    return (hashlib.sha256(task.source.encode()).hexdigest(), device, config.input_budget,
            config.n_threads)


class Pool:
    def __init__(self) -> None:
        self._idle: dict[tuple, Pair] = {}
        self._lock = threading.Lock()
        self._closed = False
        # worker templates (template.py) by their environment; None where one failed to start
        self._templates: dict[tuple, Template | None] = {}
        self._template_lock = threading.Lock()

    def template(self, env: dict[str, str], python, kind: str = "workers") -> Template | None:
        """The batch's template of this kind (template.Template) for workers of this
        environment, started on first use; None where this host cannot fork workers, or the
        template could not start (workers then start the usual way)."""
        if not sandbox.can_fork_workers():
            return None
        key = (kind, *sorted(env.items()))
        with self._template_lock:
            if self._closed:
                return None
            if key not in self._templates:
                try:
                    self._templates[key] = Template(env, python, kind)
                except (TemplateUnavailable, OSError, RuntimeError):
                    self._templates[key] = None
            template = self._templates[key]
        return template if template is not None and template.alive else None

    def take(self, key: tuple, seconds: float) -> Pair | None:
        with self._lock:
            pair = self._idle.pop(key, None)
        if pair is not None and not pair.usable_for(seconds):
            pair.close()
            return None
        return pair

    def give(self, key: tuple, pair: Pair) -> None:
        with self._lock:
            if self._closed:  # (the batch ended meanwhile)
                retired = [pair]
            else:
                old = self._idle.pop(key, None)
                self._idle[key] = pair
                extra = list(self._idle)[:-KEEP]
                retired = [old] + [self._idle.pop(k) for k in extra]
        for p in retired:
            if p is not None:
                p.close()

    def close(self) -> None:
        with self._lock, self._template_lock:
            self._closed = True
            pairs, self._idle = list(self._idle.values()), {}
            templates, self._templates = list(self._templates.values()), {}
        for p in pairs:
            p.close()
        for t in templates:
            if t is not None:
                t.close()


_active: Pool | None = None
_depth = 0
_guard = threading.Lock()


@contextmanager
def batch():
    """Within this block, sessions share warm problem and reference workers (nested blocks
    share the outermost pool, which is closed when it ends)."""
    global _active, _depth
    with _guard:
        if _active is None:
            _active = Pool()
        _depth += 1
        pool = _active
    try:
        yield pool
    finally:
        with _guard:
            _depth -= 1
            done = _depth == 0
            if done:
                _active = None
        if done:
            pool.close()


def active() -> Pool | None:
    return _active
