"""What a hostile test checks the host for afterwards: only what its own evaluations used.

Another perfgym on the machine (a second test run, a user's search) holds sandbox uids and work
directories of its own; counting every sandbox process or every new `perfgym-*` directory would
blame the test for them. So the uids and work directories the test's evaluations take are
recorded as they are taken, and only those are checked."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from perfgym import sandbox
from perfgym.sandbox import LOCK_DIR, processes_of_uid


class SandboxUse:
    """The sandbox uids and work directories taken while it records."""

    def __init__(self) -> None:
        self.uids: list[int] = []
        self.workdirs: list[Path] = []

    def workdirs_left(self) -> list[Path]:
        return [d for d in self.workdirs if d.exists()]

    def processes_left(self) -> dict[int, list[int]]:
        """Processes still running as one of the recorded uids, by uid. A uid another evaluation
        holds by now is skipped: its processes are that evaluation's."""
        left = {}
        for uid in sorted(set(self.uids)):
            fd = os.open(LOCK_DIR / f"{uid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            else:
                if pids := processes_of_uid(uid):
                    left[uid] = pids
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        return left


def record(patch: pytest.MonkeyPatch, use: SandboxUse) -> None:
    """Until `patch` is undone, every sandbox uid and work directory taken goes into `use`."""
    enter, make_workdir = sandbox.UidSlot.__enter__, sandbox.make_workdir

    def recording_enter(self):
        use.uids.append(enter(self))
        return use.uids[-1]

    def recording_make_workdir(*args, **kwargs):
        use.workdirs.append(make_workdir(*args, **kwargs))
        return use.workdirs[-1]

    patch.setattr(sandbox.UidSlot, "__enter__", recording_enter)
    patch.setattr(sandbox, "make_workdir", recording_make_workdir)


@pytest.fixture
def sandbox_use(monkeypatch) -> SandboxUse:
    use = SandboxUse()
    record(monkeypatch, use)
    return use


@pytest.fixture(scope="module")
def module_sandbox_use():
    """What the module's tests take, all of them (a batch shared by several tests)."""
    use = SandboxUse()
    with pytest.MonkeyPatch.context() as patch:
        record(patch, use)
        yield use
