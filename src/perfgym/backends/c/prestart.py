"""The timed run's harness, started before the timing lane is the parent's.

The harness (`harness MANIFEST go FD`) loads its inputs, says "@r 0" and waits for one byte on
FD. The parent starts it beside the check call, in the shared lane, and sends the byte once the
check has passed and the exclusive lane is its own: the sandbox, the process start and the
loading of the inputs are then no longer part of the exclusive lane's time.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time

from ... import sandbox
from ...sandbox import kill_group
from .. import Prepared
from . import build as cbackend

# A harness started beside the check call waits at most this long for the timing lane (behind
# other candidates' timed runs, or another perfgym's) before it gives up; then a fresh one runs.
PRESTART_WAIT = 600.0  # seconds


class PrestartedRun:
    """The timed run's harness, started in the shared lane beside the check call: its sandbox,
    process start and loading of the inputs (about 10 ms for dgemm-256) overlap the check, not
    the exclusive lane, which is held from the word to go (`go`) on. It runs no kernel code
    before that word, and the calibration still comes first after it. The run's time limit
    counts from the word: the parent ends it config.timeout (and the harness's allowance for
    its own work on the arrays, build.harness_allowance) after `go`. `close` ends one never
    told to go (a wrong answer): it reads the closed pipe and exits."""

    def __init__(self, p: Prepared) -> None:
        self.config = p.config
        self.limit = p.config.timeout + cbackend.harness_allowance(p.task, p.size)
        # a directory of its own: two sandboxed commands cannot share one (each owns its
        # directory as its own uid), and the check call is running in the build's
        self.workdir = sandbox.make_workdir()
        for name in ["run", "manifest.txt", *(f.name for f in p.workdir.glob("in[12]_*.bin"))]:
            shutil.copy2(p.workdir / name, self.workdir / name)
        read_end, self.go_end = os.pipe()
        self.ready = threading.Event()  # it waits for the word, or it has ended
        self.result = None
        self.error: BaseException | None = None
        self.proc = None
        self.went = 0.0  # when it was told to go
        self.expired = False
        self.timer: threading.Timer | None = None
        closed = threading.Lock()
        left = [read_end]

        def close_read_end(proc=None) -> None:  # once the child has its copy, or never will
            self.proc = proc or self.proc
            with closed:
                while left:
                    os.close(left.pop())

        def marker(line: str) -> None:
            if line == "@r 0":
                self.ready.set()

        def run() -> None:
            try:
                self.result = cbackend.run(p.task, p.size, p.config, self.workdir, go_fd=read_end,
                                           wait_seconds=PRESTART_WAIT, on_start=close_read_end,
                                           on_marker=marker)
            except BaseException as exc:  # raised in the caller by wait()
                self.error = exc
            finally:
                close_read_end()
                self.ready.set()

        self.thread = threading.Thread(target=run, daemon=True, name="perfgym-prestart")
        self.thread.start()

    def wait_ready(self) -> None:
        """Until it waits for the word (or has ended); one not ready within the run's limit
        (loading inputs cannot take that long) is ended, and a fresh run will be made."""
        if not self.ready.wait(self.limit) and self.proc is not None:
            kill_group(self.proc)
        self.ready.wait()

    def go(self) -> bool:
        """Tell it to go; False if it is not waiting (it ended first: run a fresh one)."""
        self.wait_ready()
        if not self.thread.is_alive() or self.go_end < 0:
            return False
        # Before the word: the harness cannot start before it, and a parent kept from its CPU
        # right after writing it must not start the clock late (a starved parent once timed
        # the whole run shorter than the calls the harness then reported).
        self.went = time.monotonic()
        try:
            os.write(self.go_end, b"g")
        except OSError:  # (BrokenPipeError: it is gone)
            return False
        finally:
            self._close_go_end()
        self.timer = threading.Timer(self.limit, self._expire)
        self.timer.start()
        return True

    def _expire(self) -> None:
        self.expired = True
        if self.proc is not None:
            kill_group(self.proc)

    def wait(self):
        """The finished run, timed from the word to go (as a run started then would be)."""
        self.thread.join()
        if self.timer is not None:
            self.timer.cancel()
        if self.error is not None:
            raise self.error
        markers = self.result.markers  # the harness's "@r 0" is first; any other is kept
        if markers and markers[0][1] == "@r 0":
            markers = markers[1:]
        return dataclasses.replace(self.result, markers=markers,
                                   wall=time.monotonic() - self.went,
                                   timed_out=self.result.timed_out or self.expired)

    def close(self) -> None:
        """End it if it was never told to go (it reads the closed pipe and exits), and remove
        its directory."""
        self._close_go_end()
        self.thread.join()
        if self.timer is not None:
            self.timer.cancel()
        if not self.config.extra.get("keep_workdir"):  # (as the build's directory)
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _close_go_end(self) -> None:
        if self.go_end >= 0:
            os.close(self.go_end)
            self.go_end = -1
