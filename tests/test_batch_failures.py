"""One request that raises does not take its batch with it.

Real builds and timed runs of a small dot product; the host failure is a monkeypatched backend
step (the build, or the measurement) that raises for candidates carrying a marker."""
from __future__ import annotations

import math
import os
import socket
import threading
import time

import pytest

import perfgym.backends.c as cbackend
from perfgym import EvalConfig, get_task, sandbox
from perfgym.executors import Request, evaluate_many
from perfgym.outcome import Outcome, Status
from perfgym.rewards import SCHEMES, score

FAST = EvalConfig(use_cache=False, compare_baseline=False, timeout=3.0, max_time=0.2,
                  max_samples=10, min_samples=3)
MARKER = "static const int the_host_breaks_on_this_one = 1;\n"  # code: in the cache key


@pytest.fixture(scope="module")
def dot():
    return get_task("dot")


def _requests(dot, texts, config=FAST):
    return [Request(dot, text, {"N": 1000}, config) for text in texts]


def _my_workdirs() -> list:
    """Work directories this process made and has not removed."""
    stamp = sandbox._owner_stamp(os.getpid())
    return [p for p in sandbox.work_root().glob("perfgym-*") if f"-{stamp}-" in p.name]


@pytest.fixture
def build_breaks(monkeypatch):
    real = cbackend.cbuild.build

    def build(task, code, *args, **kwargs):
        if MARKER in code:
            raise OSError(28, "No space left on device")
        return real(task, code, *args, **kwargs)
    monkeypatch.setattr(cbackend.cbuild, "build", build)


@pytest.fixture
def measure_breaks(monkeypatch):
    real = cbackend.measure

    def measure(p, fail):
        if MARKER in p.code:
            raise RuntimeError("the timing probe crashed")
        return real(p, fail)
    monkeypatch.setattr(cbackend, "measure", measure)


def test_a_build_that_raises_is_a_host_error_and_the_rest_of_the_batch_is_scored(
        dot, build_breaks):
    naive = dot.baseline.read_text()
    seen = []
    outcomes = evaluate_many(_requests(dot, [naive, MARKER + naive, naive]), workers=2,
                             on_result=lambda i, o: seen.append(i))
    assert [o.status for o in outcomes] == [Status.OK, Status.HOST_ERROR, Status.OK]
    assert sorted(seen) == [0, 1, 2]
    broken = outcomes[1]
    assert "No space left on device" in broken.message and "not a verdict" in broken.message
    assert "\n" not in broken.message and "OSError" in broken.details
    assert broken.task == "dot" and broken.sizes == {"N": 1000}
    assert not _my_workdirs()


def test_a_measurement_that_raises_is_a_host_error_and_its_directory_goes(dot, measure_breaks):
    naive = dot.baseline.read_text()
    outcomes = evaluate_many(_requests(dot, [MARKER + naive, naive, MARKER + naive]))
    assert [o.status for o in outcomes] == [Status.HOST_ERROR, Status.OK, Status.HOST_ERROR]
    assert "timing probe crashed" in outcomes[0].message
    assert not _my_workdirs()


def test_a_baseline_that_raises_gives_host_errors_not_an_exception(dot, monkeypatch):
    import sys
    ev = sys.modules["perfgym.evaluate"]  # (the package's `evaluate` is the function)

    def baseline(*a, **k):
        raise RuntimeError("the baseline's compiler vanished")
    monkeypatch.setattr(ev, "baseline", baseline)
    monkeypatch.setattr(ev, "_recent", {})  # no baseline an earlier test timed is shared
    outcomes = evaluate_many(_requests(dot, [dot.baseline.read_text()] * 2,
                                       FAST.replace(compare_baseline=True)))
    assert [o.status for o in outcomes] == [Status.HOST_ERROR] * 2
    assert "compiler vanished" in outcomes[0].message
    assert not _my_workdirs()


def test_an_interrupted_batch_stops_and_leaves_no_work_directory(dot):
    naive = dot.baseline.read_text()
    texts = [naive + f"/* {i} */" for i in range(6)]  # distinct: no cache, no sharing
    done = []

    def interrupt(i, outcome):
        done.append(i)
        raise KeyboardInterrupt
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        evaluate_many(_requests(dot, texts), workers=2, on_result=interrupt)
    assert len(done) == 1
    assert not _my_workdirs()  # the builds under way finished, and their directories went
    assert time.monotonic() - started < 120


def test_every_scheme_refuses_a_host_error_and_scores_the_rest_as_without_it():
    def outcome(status, gflops=None, speedup=None):
        return Outcome(status=status, task="dot", sizes={}, gflops=gflops, speedup=speedup)
    group = [outcome(Status.OK, 2.0, 2.0), outcome(Status.HOST_ERROR),
             outcome(Status.WRONG_ANSWER), outcome(Status.OK, 4.0, 0.5)]
    without = [group[0], group[2], group[3]]
    for scheme in SCHEMES:
        rewards = score(scheme, group)
        assert math.isnan(rewards[1]), scheme
        assert [rewards[0], rewards[2], rewards[3]] == score(scheme, without), scheme


def test_the_service_answers_503_when_the_host_fails_a_candidate(dot, build_breaks):
    pytest.importorskip("fastapi", reason="the serve extra is not installed: "
                        "pip install 'perfgym[serve]'")
    import uvicorn

    from perfgym.client import RewardClient, RewardServiceError
    from perfgym.serve import create_app
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app("t0ken"), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        client = RewardClient(f"http://127.0.0.1:{port}", "t0ken", timeout=120)
        for _ in range(200):
            try:
                client.health()
                break
            except RewardServiceError:
                time.sleep(0.05)
        naive = dot.baseline.read_text()
        with pytest.raises(RewardServiceError, match="503"):
            client.evaluate([{"task": "dot", "code": naive, "size": "N=1000"},
                             {"task": "dot", "code": MARKER + naive, "size": "N=1000"}])
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert not _my_workdirs()


def test_the_ray_executor_records_a_request_that_raises_on_the_node_and_answers_the_rest(
        dot, tmp_path, local_ray):
    import shutil

    from perfgym.executors.ray_executor import RayExecutor
    gone = tmp_path / "dot_copy"
    shutil.copytree(dot.directory, gone)
    toml = gone / "task.toml"
    toml.write_text(toml.read_text().replace('name = "dot"', 'name = "dot_copy"', 1))
    vanished = get_task(str(gone))  # a task directory removed before the node loads it
    shutil.rmtree(gone)
    executor = RayExecutor()  # a local one-node cluster, its node the benchmark node
    naive = dot.baseline.read_text()
    outcomes = executor.evaluate_many([Request(dot, naive, {"N": 1000}, FAST),
                                       Request(vanished, naive, {"N": 1000}, FAST)])
    assert vanished.name == "dot_copy"  # sent by path, not by a built-in name
    assert [o.status for o in outcomes] == [Status.OK, Status.HOST_ERROR]
    assert "not a verdict" in outcomes[1].message
