"""The timing lane is one per machine, whatever PERFGYM_CACHE_DIR each process uses.

Real processes with different cache directories take the exclusive lane in a loop and write down
when they held it; no two intervals may overlap."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from perfgym import lane
from perfgym.errors import HostError

HOLDER = """
import sys, time
from perfgym.lane import LANE
out, rounds = sys.argv[1], int(sys.argv[2])
with open(out, "w") as f:
    for _ in range(rounds):
        with LANE.exclusive():
            start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process
            time.sleep(0.02)
            end = time.monotonic()
        f.write(f"{start} {end}\\n")
        time.sleep(0.002)
"""


def test_processes_with_different_cache_dirs_never_hold_the_exclusive_lane_at_once(tmp_path):
    rounds = 40
    procs = []
    for i in range(3):
        env = dict(os.environ, PERFGYM_CACHE_DIR=str(tmp_path / f"cache{i}"))
        procs.append(subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / f"{i}.txt"),
                                       str(rounds)], env=env))
    for p in procs:
        assert p.wait(timeout=300) == 0
    intervals = sorted((float(a), float(b), i) for i in range(3)
                       for a, b in (line.split() for line in
                                    (tmp_path / f"{i}.txt").read_text().splitlines()))
    assert len(intervals) == 3 * rounds
    # the processes did interleave (else the test proves nothing)...
    assert len({i for _, _, i in intervals[:rounds]}) > 1 or \
        len({i for _, _, i in intervals[rounds:]}) > 1
    # ...and no interval starts before the previous one ended
    overlaps = [(x, y) for x, y in zip(intervals, intervals[1:]) if y[0] < x[1]]
    assert not overlaps, f"{len(overlaps)} overlapping holds, e.g. {overlaps[0]}"


def test_the_lock_file_is_not_in_the_cache_dir_and_every_user_can_open_it():
    with lane.LANE.exclusive():
        pass
    assert "PERFGYM_CACHE_DIR" not in str(lane.LOCK_PATH)
    mode = os.stat(lane.LOCK_PATH, follow_symlinks=False)
    assert stat.S_ISREG(mode.st_mode) and mode.st_mode & 0o444 == 0o444
    assert mode.st_mode & 0o222 == 0  # nobody needs to write it


def test_a_symlink_planted_at_the_lock_path_is_not_followed(tmp_path, monkeypatch):
    target = tmp_path / "victim"
    target.write_text("keep")
    planted = tmp_path / "perfgym-lane.lock"
    planted.symlink_to(target)
    monkeypatch.setattr(lane, "LOCK_PATH", planted)
    with pytest.raises(HostError, match="lock file"):
        with lane.LANE.exclusive():
            pass
    assert target.read_text() == "keep" and os.stat(target).st_mode & 0o777 != 0o444


def test_a_missing_lock_file_is_created_read_only_whatever_the_umask(tmp_path, monkeypatch):
    path = tmp_path / "perfgym-lane.lock"
    monkeypatch.setattr(lane, "LOCK_PATH", path)
    old = os.umask(0o077)
    try:
        with lane.LANE.shared():
            pass
    finally:
        os.umask(old)
    assert Path(path).stat().st_mode & 0o777 == 0o444
