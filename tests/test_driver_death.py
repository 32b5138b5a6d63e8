"""A driver that dies (kill -9, SIGTERM, Ctrl-C) takes its sandboxed commands with it, and what
it leaves on disk is swept.

Real drivers (a Python process calling `evaluate`, the `perfgym eval` command) run a kernel that
spins forever under a 60 s timeout; the test kills the driver once the harness is spinning."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfgym import sandbox

SPIN = """void dot_optimized(double *x, double *y, double *out, int N) {
    volatile double s = 0; for (;;) s += 1.0;
}
"""
PY_DRIVER = f"""
from perfgym import EvalConfig, evaluate, get_task
evaluate(get_task("dot"), {SPIN!r}, {{"N": 1000}},
         EvalConfig(use_cache=False, compare_baseline=False, timeout=60, threads=1))
"""
STARTUP = 120.0  # seconds a driver may take to reach its timed run on a busy machine
GONE_WITHIN = 5.0  # seconds: "a couple", with room for a busy CI machine


def _stat(pid: int) -> tuple[str, float] | None:
    """(state, CPU seconds) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    s = _stat(pid)
    return s is not None and s[0] not in ("Z", "X")


def _commands_of(driver: int, name: str) -> list[tuple[int, Path]]:
    """(pid, work directory) of the live processes running `name` in `driver`'s work
    directories (their names carry the driver's pid)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{entry}/cwd"))
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"-{driver}." in cwd.name and argv[0].endswith(name.encode()) and _alive(int(entry)):
            found.append((int(entry), cwd))
    return found


def _spinning_harness(driver: subprocess.Popen) -> tuple[int, Path]:
    """Wait until `driver`'s harness has spent CPU time in the spinning kernel."""
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        assert driver.poll() is None, driver.communicate()
        for pid, workdir in _commands_of(driver.pid, "run"):
            if (s := _stat(pid)) and s[1] > 0.5:
                return pid, workdir
        time.sleep(0.1)
    driver.kill()
    pytest.fail(f"the driver did not reach its timed run in {STARTUP:.0f} s")


def _gone_within(pid: int, seconds: float) -> float | None:
    """Seconds until `pid` stopped running, or None if it still runs after `seconds`."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if not _alive(pid):
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def _cli(tmp_path: Path) -> subprocess.Popen:
    spin = tmp_path / "spin.c"
    spin.write_text(SPIN)
    return subprocess.Popen([sys.executable, "-m", "perfgym.cli", "eval", str(spin), "--task",
                             "dot", "--size", "N=1000", "--timeout", "60", "--threads", "1",
                             "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_kill_9_of_a_python_driver_kills_its_harness_and_the_sweep_removes_its_directory():
    driver = subprocess.Popen([sys.executable, "-c", PY_DRIVER])
    harness, workdir = _spinning_harness(driver)
    driver.kill()
    driver.wait()
    took = _gone_within(harness, GONE_WITHIN)
    assert took is not None, "the harness outlived its driver"
    assert workdir.is_dir()  # nobody was left to remove it...
    assert workdir in sandbox.sweep_stale()  # ...until the sweep
    assert not workdir.exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_perfgym_eval_on_a_signal_kills_its_harness_removes_its_directory_and_dies_of_it(
        tmp_path, signum):
    driver = _cli(tmp_path)
    harness, workdir = _spinning_harness(driver)
    driver.send_signal(signum)
    _, err = driver.communicate(timeout=30)
    assert driver.returncode == -signum, err.decode()[-2000:]  # a shell shows 128 + signum
    assert b"Traceback" not in err
    assert not _alive(harness)
    assert not workdir.exists()  # removed by the driver itself, before any sweep


def test_a_killed_perfgym_eval_leaves_nothing_once_the_next_one_starts(tmp_path):
    driver = _cli(tmp_path)
    harness, workdir = _spinning_harness(driver)
    driver.kill()
    driver.communicate()
    assert _gone_within(harness, GONE_WITHIN) is not None
    assert workdir.is_dir()
    # the next eval's start-up sweep (a failing one: it stops right after the sweep)
    nxt = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", "--task", "no_such_task"],
                         capture_output=True)
    assert nxt.returncode == 2
    assert not workdir.exists()


@pytest.mark.skipif(not sandbox.isolation().own_uid, reason="needs root: sandbox uids")
def test_the_sweep_kills_what_a_dead_drivers_command_left_outside_its_group():
    """A forked child that made its own session escapes the group kill and the parent-death
    signal (it is no child of the driver); it runs under a sandbox uid no driver holds any more,
    so the sweep kills it."""
    driver = subprocess.Popen([sys.executable, "-c", """
from perfgym import sandbox
d = sandbox.make_workdir()
sandbox.run(["sh", "-c", "setsid sleep 301 & exec sleep 302"], d, sandbox.Limits(wall_seconds=600))
"""])
    deadline = time.monotonic() + STARTUP
    while len(found := _commands_of(driver.pid, "sleep")) < 2:
        assert time.monotonic() < deadline and driver.poll() is None
        time.sleep(0.05)
    driver.kill()
    driver.wait()
    pids = {pid for pid, _ in found}
    deadline = time.monotonic() + GONE_WITHIN
    while len([p for p in pids if _alive(p)]) > 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    survivors = [p for p in pids if _alive(p)]
    assert len(survivors) == 1  # the group's leader died with the driver, the escapee did not
    sandbox.sweep_stale()
    assert _gone_within(survivors[0], GONE_WITHIN) is not None
    assert not found[0][1].exists()


def test_the_sweep_keeps_live_drivers_directories_and_fresh_unstamped_ones():
    mine = sandbox.make_workdir()  # this process is alive
    unstamped = Path(sandbox.work_root()) / "perfgym-zz0test0"
    unstamped.mkdir()
    dead = subprocess.run([sys.executable, "-c", "from perfgym import sandbox; "
                           "print(sandbox.make_workdir())"], capture_output=True, text=True)
    theirs = Path(dead.stdout.strip())
    old = Path(sandbox.work_root()) / "perfgym-zz1test1"
    old.mkdir()
    os.utime(old, (time.time() - 2 * sandbox.UNSTAMPED_AGE,) * 2)
    try:
        removed = sandbox.sweep_stale()
        assert theirs in removed and not theirs.exists()  # its driver has exited
        assert old in removed and not old.exists()  # unstamped and a day old
        assert mine.is_dir() and unstamped.is_dir()
    finally:
        for d in (mine, unstamped, old):
            if d.exists():
                d.rmdir()


def test_a_reused_pid_does_not_keep_a_dead_drivers_directory():
    """The stamp holds the start time too: a new process under the old pid is not the owner."""
    pid = os.getpid()
    fake = Path(sandbox.work_root()) / f"perfgym-{pid}.1-zz2test2"  # started at tick 1: not us
    fake.mkdir()
    try:
        assert fake in sandbox.sweep_stale()
    finally:
        if fake.exists():
            fake.rmdir()
