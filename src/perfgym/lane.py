"""The benchmark lane: timing runs are exclusive on a machine; builds share it.

A reader-writer lock: builds take it shared (many at once), a timing run takes it exclusive
(nothing else of ours runs while a kernel is timed). Waiting timing runs go first, so a queue of
builds cannot starve them. An flock on one file at a fixed path (not in the cache directory,
which differs between users, tests and runs) extends the rule to every perfgym process on the
machine.

A waiter can be given a bound and a way out (`bounded`): a reward call for a trainer waits at
most PERFGYM_REWARD_WAIT seconds for each hold of the lane, then gets LaneBusy (a HostError:
no verdict on the candidate, which every reward scheme refuses, so the trainer reads it as
neutral), and a caller that went away (an HTTP client that disconnected) sets its cancel event
so that what has not started timing stops (Cancelled). Without `bounded` a wait is unbounded,
as perfgym's own search and training want.
"""
from __future__ import annotations

import contextvars
import fcntl
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from .errors import HostError

# /run/lock is the machine's directory for lock files (a tmpfs: never stale across boots);
# $PERFGYM_LANE_LOCK moves it (containers of one machine share it through a mounted file)
LOCK_PATH = Path(os.environ.get("PERFGYM_LANE_LOCK") or (
    (Path("/run/lock") if os.path.isdir("/run/lock") else Path(tempfile.gettempdir()))
    / "perfgym-lane.lock"))

REWARD_WAIT = 120.0  # seconds a reward call waits for each hold of the lane, by default: under
# OpenRLHF's 180 s client timeout with room for the build and the timing itself
POLL = 0.05  # seconds between looks at a bounded wait's deadline and cancel event


class LaneBusy(HostError):
    """A bounded wait for the lane passed its bound: no verdict on the candidate."""


class Cancelled(BaseException):
    """The caller of a bounded wait went away (its cancel event is set). A BaseException, as
    Ctrl-C is: an evaluation batch stops and cleans up rather than recording it."""


@dataclass(frozen=True)
class Bound:
    seconds: Optional[float]  # None: no time bound
    cancel: Optional[threading.Event] = None


_bound: contextvars.ContextVar[Optional[Bound]] = contextvars.ContextVar("lane_bound",
                                                                        default=None)


def reward_wait() -> float:
    """The bound of a reward call's waits: $PERFGYM_REWARD_WAIT seconds, else REWARD_WAIT."""
    text = os.environ.get("PERFGYM_REWARD_WAIT")
    try:
        value = float(text) if text is not None else REWARD_WAIT
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:
        raise ValueError(f"PERFGYM_REWARD_WAIT={text!r} is not a wait: give seconds, e.g. 60")
    return value


@contextmanager
def bounded(seconds: Optional[float], cancel: Optional[threading.Event] = None
            ) -> Iterator[None]:
    """Every wait for the lane in this context (and in threads started with a copy of it, as
    evaluate_many's builders are) lasts at most `seconds`, and ends when `cancel` is set."""
    token = _bound.set(Bound(seconds, cancel))
    try:
        yield
    finally:
        _bound.reset(token)


def wait_bound() -> Optional[float]:
    """The seconds this context's bounded waits may last (None: unbounded), for waits of other
    kinds (the Ray executor's for its nodes)."""
    bound = _bound.get()
    return bound.seconds if bound else None


def cancelled() -> bool:
    """Whether the caller of this context's bounded waits has gone (for waits of other kinds,
    such as the Ray executor's for its nodes)."""
    bound = _bound.get()
    return bool(bound and bound.cancel is not None and bound.cancel.is_set())


class _Waiting:
    """One bounded wait: raises LaneBusy past its deadline, Cancelled once its event is set."""

    def __init__(self, what: str) -> None:
        self.bound = _bound.get()
        self.what = what
        seconds = self.bound.seconds if self.bound else None
        self.deadline = None if seconds is None else time.monotonic() + seconds

    @property
    def blocking(self) -> bool:
        return self.bound is None

    def check(self) -> None:
        if self.bound.cancel is not None and self.bound.cancel.is_set():
            raise Cancelled(f"the caller went away while waiting for the lane ({self.what})")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise LaneBusy(f"waited {self.bound.seconds:g} s for the timing lane ({self.what}): "
                           "other evaluations on this machine held it; no verdict on this "
                           "candidate (the bound is PERFGYM_REWARD_WAIT)")

    def slice(self) -> Optional[float]:
        if self.blocking:
            return None
        self.check()
        left = POLL if self.deadline is None else self.deadline - time.monotonic()
        return max(0.0, min(POLL, left))


class Lane:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self.exclusive_seconds = 0.0  # held exclusive so far (the timing lane's busy time)

    @contextmanager
    def shared(self) -> Iterator[None]:
        waiting = _Waiting("to build")
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait(waiting.slice())
            self._readers += 1
        try:
            with _flock(fcntl.LOCK_SH, waiting):
                yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        waiting = _Waiting("to time")
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._cond.wait(waiting.slice())
            finally:
                self._writers_waiting -= 1
                self._cond.notify_all()  # builds held back for this writer may go now
            self._writer = True
        held = None
        try:
            with _flock(fcntl.LOCK_EX, waiting):
                held = time.monotonic()
                yield
        finally:
            with self._cond:
                if held is not None:
                    self.exclusive_seconds += time.monotonic() - held
                self._writer = False
                self._cond.notify_all()


@contextmanager
def _flock(mode: int, waiting: Optional[_Waiting] = None) -> Iterator[None]:
    fd = _open_lock(LOCK_PATH)
    try:
        if waiting is None or waiting.blocking:
            fcntl.flock(fd, mode)
        else:  # another process holds it: look again until the bound or the cancel
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(waiting.slice())
        yield
    finally:
        os.close(fd)  # releases the lock


def _open_lock(path: Path) -> int:
    """Open the lock file read-only (enough for flock), creating it readable by every user so
    all of them share the lane. In a world-writable directory a symlink planted at the path is
    never followed, and a file another user made is opened, not re-created."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        try:
            try:
                return os.open(path, flags)
            except FileNotFoundError:
                pass
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o444)
            except FileExistsError:
                continue  # made by another process in between
            os.fchmod(fd, 0o444)  # whatever the umask
            return fd
        except OSError as exc:  # a symlink, a directory, no permission
            raise HostError(f"cannot open the timing lane's lock file {path}: {exc.strerror} "
                            "(perfgym makes it; remove whatever is there)") from None


LANE = Lane()  # one per process; the flock joins processes
