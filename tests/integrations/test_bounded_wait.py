"""Every wait for the timing lane has a bound and a reason.

Another process holds the machine-wide lane (as a long timing or a queue of them would); a
reward call waits PERFGYM_REWARD_WAIT seconds at most, then its answer is refused with the
reason and scores neutral. A caller that goes away stops waiting at once. The lane's lock file
is a test's own, so the machine's real lane (other people's timings) is left alone."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid

import pytest

from answers import ANSWERS, LABEL
from perfgym import lane

HOLDER = """
import sys, time
from pathlib import Path
from perfgym import lane
lane.LOCK_PATH = Path(sys.argv[1])
with lane.LANE.exclusive():
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def held_lane(tmp_path, monkeypatch):
    """The lane held exclusive by another process, for as long as the test runs."""
    path = tmp_path / "lane.lock"
    monkeypatch.setattr(lane, "LOCK_PATH", path)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def fresh(name: str) -> str:
    """The answer with a comment no cache has seen, so it must be built and timed."""
    return ANSWERS[name].replace("out[0] = s;", f"out[0] = s + 0.0 * {uuid.uuid4().int % 10**9};")


def test_a_reward_call_waits_for_a_held_lane_at_most_its_bound(held_lane, monkeypatch):
    from perfgym.integrations import Label, score_answers
    from perfgym.integrations.verl import compute_score
    from perfgym.machine import machine_info
    machine_info()  # (a disturbed cached probe is measured again first: not a lane wait)
    monkeypatch.setenv("PERFGYM_REWARD_WAIT", "1")
    started = time.monotonic()
    out = compute_score("perfgym/dot", fresh("naive"), LABEL)
    # a baseline wait, then the build's: each at most 1 s, and nothing else waits
    assert time.monotonic() - started < 15
    assert out["refused"] == 1.0 and out["score"] == 0.0 and out["ok"] == 0.0
    scored = score_answers([(Label.parse(LABEL), fresh("naive"))])[0]
    assert scored.refused and scored.outcome.status.value == "HOST_ERROR"
    assert "waited 1 s for the timing lane" in scored.outcome.message


def test_a_cancelled_wait_ends_at_once(held_lane):
    cancel = threading.Event()
    ended = {}

    def wait():
        with lane.bounded(None, cancel):
            try:
                with lane.LANE.exclusive():
                    ended["held"] = True
            except lane.Cancelled:
                ended["at"] = time.monotonic()

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()  # no time bound: it waits for the holder...
    cancel.set()
    set_at = time.monotonic()
    t.join(timeout=5)
    assert "held" not in ended and ended["at"] - set_at < 0.5  # ...until its caller goes
    with lane.LANE._cond:  # and it left no waiting writer behind to hold back builds
        assert lane.LANE._writers_waiting == 0 and not lane.LANE._writer
