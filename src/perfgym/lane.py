"""The benchmark lane: timing runs are exclusive on a machine; builds share it.

A reader-writer lock: builds take it shared (many at once), a timing run takes it exclusive
(nothing else of ours runs while a kernel is timed). Waiting timing runs go first, so a queue of
builds cannot starve them. An flock on one file at a fixed path (not in the cache directory,
which differs between users, tests and runs) extends the rule to every perfgym process on the
machine.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import HostError

# /run/lock is the machine's directory for lock files (a tmpfs: never stale across boots)
LOCK_PATH = (Path("/run/lock") if os.path.isdir("/run/lock")
             else Path(tempfile.gettempdir())) / "perfgym-lane.lock"


class Lane:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self.exclusive_seconds = 0.0  # held exclusive so far (the timing lane's busy time)

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
        held = None
        try:
            with _flock(fcntl.LOCK_EX):
                held = time.monotonic()
                yield
        finally:
            with self._cond:
                if held is not None:
                    self.exclusive_seconds += time.monotonic() - held
                self._writer = False
                self._cond.notify_all()


@contextmanager
def _flock(mode: int) -> Iterator[None]:
    fd = _open_lock(LOCK_PATH)
    try:
        fcntl.flock(fd, mode)
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
