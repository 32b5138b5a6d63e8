"""An abandoned request to `perfgym serve` is cancelled, and a retry joins the evaluation
under way rather than queueing a second one.

OpenRLHF's client gives up after 180 s and sends the same request again. Here the timing lane
(a lock file of the test's own, so the machine's real lane is left alone) is held by another
process, so every evaluation waits; a client that times out must leave nothing waiting on the
server, and two identical requests must start one evaluation."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid

import pytest

pytest.importorskip("fastapi", reason="perfgym serve needs the serve extra: pip install 'perfgym[serve]'")
httpx = pytest.importorskip("httpx", reason="the test extra is not installed: "
                            "pip install 'perfgym[test]'")

from answers import ANSWERS, LABEL  # noqa: E402
from service import running_service  # noqa: E402

HOLDER = """
import time
from perfgym.lane import LANE
with LANE.exclusive():
    print("held", flush=True)
    time.sleep(300)
"""


def body(name: str) -> dict:
    answer = ANSWERS[name].replace("out[0] = s;", f"out[0] = s + 0.0 * {uuid.uuid4().int % 10**9};")
    return {"query": ["p " + answer], "prompts": ["p "], "labels": [LABEL]}


def wait_for(url: str, check, seconds: float = 20.0) -> dict:
    ends = time.monotonic() + seconds
    while True:
        health = httpx.get(url + "/health", timeout=10).json()
        if check(health) or time.monotonic() > ends:
            return health
        time.sleep(0.1)


@pytest.fixture
def held(tmp_path):
    env = {"PERFGYM_LANE_LOCK": str(tmp_path / "lane.lock"), "PERFGYM_REWARD_WAIT": "200"}
    import os
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, **env})
    try:
        assert holder.stdout.readline().strip() == "held"
        with running_service("--no-auth", env=env) as (_, url, _client):
            yield holder, url
    finally:
        holder.kill()
        holder.wait()


def test_an_abandoned_request_stops_and_a_retry_joins_the_running_one(held):
    holder, url = held
    # a client that gives up: its evaluation, waiting for the lane, is cancelled
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url + "/openrlhf", json=body("naive"), timeout=1.5)
    health = wait_for(url, lambda h: h["in_flight"] == 0)
    assert health["in_flight"] == 0 and health["evaluations_cancelled"] == 1, health

    # the same request twice (a retry while the first still waits): one evaluation, which
    # goes on while either caller waits and stops when both have gone
    same = body("naive")
    gave_up = []

    def call(timeout: float) -> None:
        try:
            httpx.post(url + "/openrlhf", json=same, timeout=timeout)
        except httpx.ReadTimeout:
            gave_up.append(time.monotonic())

    first = threading.Thread(target=call, args=(2.0,))
    first.start()
    time.sleep(0.5)
    retry = threading.Thread(target=call, args=(5.0,))
    retry.start()
    first.join()
    health = wait_for(url, lambda h: False, seconds=0.5)  # the first has gone, the retry waits
    assert health["evaluations_started"] == 2 and health["in_flight"] == 1, health
    assert health["evaluations_cancelled"] == 1, health
    retry.join()
    health = wait_for(url, lambda h: h["in_flight"] == 0)
    assert len(gave_up) == 2 and health["evaluations_cancelled"] == 2, health
    assert health["evaluations_started"] == 2, health
