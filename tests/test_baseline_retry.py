"""The task's own baseline is correct by construction: a verdict against it (a starved parent
on a busy machine read as tampering) is the host's, so it is judged again and a good verdict
replaces the bad one in the cache; candidates then get their speedup."""
from perfgym import EvalConfig, evaluate, get_task, machine
from perfgym.cache import cache_key
from perfgym.evaluate import baseline, outcome_cache, retime_baseline
from perfgym.outcome import Outcome, Status


def test_a_bad_cached_baseline_is_judged_again_and_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path))
    import importlib
    monkeypatch.setattr(importlib.import_module("perfgym.evaluate"), "_cache", None)
    # (a cache of this test's own, under the directory above)
    task = get_task("dot")
    config = EvalConfig(max_time=0.2, max_samples=10, min_samples=3)
    size = dict(task.default_size)
    cfg = config.replace(stage=None, compare_baseline=False, seed=None, profile=())
    info = machine.summary(machine.machine_info(cfg.compiler))
    key = cache_key(task, task.baseline.read_text(), size, cfg, info["id"])
    bad = Outcome(Status.WRONG_ANSWER, task.name, size,
                  "tampering: the harness reported 1.95 ms per call but the parent saw 3.96 ms")
    outcome_cache().put(key, bad)
    assert outcome_cache().get(key).status is Status.WRONG_ANSWER

    base = baseline(task, size, config)
    assert base.ok, base.message
    assert outcome_cache().get(key).ok  # the bad verdict is gone from the cache
    candidate = evaluate(task, task.expert.read_text(), None, config)
    assert candidate.ok and candidate.speedup is not None


def test_a_baseline_timed_again_replaces_the_cached_copy(tmp_path, monkeypatch):
    """An experiment re-times its baselines on a quiet machine before it judges: the cached
    copy (here one planted 5x too slow, as if timed under load) gives way to the new timing, and
    candidates are then judged against the new one."""
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path))
    import dataclasses
    import importlib
    monkeypatch.setattr(importlib.import_module("perfgym.evaluate"), "_cache", None)
    task = get_task("dot")
    config = EvalConfig(max_time=0.2, max_samples=10, min_samples=3)
    size = dict(task.default_size)
    first = baseline(task, size, config)
    assert first.ok and first.timing
    cfg = config.replace(stage=None, compare_baseline=False, seed=None, profile=())
    info = machine.summary(machine.machine_info(cfg.compiler))
    key = cache_key(task, task.baseline.read_text(), size, cfg, info["id"])
    slow = dataclasses.replace(first, timing=dataclasses.replace(
        first.timing, median=first.timing.median * 5))
    outcome_cache().put(key, slow)
    assert baseline(task, size, config).timing.median == slow.timing.median  # served cached

    fresh = retime_baseline(task, size, config)
    assert fresh.ok and not fresh.cached
    assert fresh.timing.median < slow.timing.median / 2
    assert outcome_cache().get(key).timing.median == fresh.timing.median
    assert baseline(task, size, config).timing.median == fresh.timing.median


def test_threads_asking_at_once_time_the_baseline_once(tmp_path, monkeypatch):
    """verl's reward loop sends 16 calls from threads; on a fresh node every one missed the
    cache and timed the naive kernel itself, 16 timings on the lane where one was needed. One
    thread times it; the others wait and are served its result, with the cache on and off."""
    import importlib
    import threading
    ev = importlib.import_module("perfgym.evaluate")
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ev, "_cache", None)
    monkeypatch.setattr(ev, "_recent", {})
    timed = []
    real_measure = ev.measure

    def counting_measure(p):
        timed.append(p.code)
        return real_measure(p)

    monkeypatch.setattr(ev, "measure", counting_measure)
    task = get_task("dot")
    size = dict(task.default_size)
    for config in (EvalConfig(max_time=0.2, max_samples=10, min_samples=3),
                   EvalConfig(max_time=0.2, max_samples=10, min_samples=3, use_cache=False)):
        timed.clear()
        start = threading.Barrier(8)
        results = []

        def ask():
            start.wait()
            results.append(ev.recent_baseline(task, size, config))

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 8 and all(r.ok for r in results)
        # one timing, unless the host disturbed it (a disturbed baseline is never shared)
        assert len(timed) == 1 or any(r.disturbed for r in results), (len(timed), config)


def test_a_bounded_caller_waits_for_another_threads_baseline_no_longer_than_its_bound():
    """The wait for another thread's timing of the naive kernel is a wait for the lane by
    proxy: a reward call's is bounded the same way (LaneBusy past PERFGYM_REWARD_WAIT, never
    a queue of bounds), and an unbounded caller gets the lock once it is free."""
    import importlib
    import threading
    import time

    import pytest

    from perfgym import lane
    ev = importlib.import_module("perfgym.evaluate")
    key = ("dot", "a key of this test's own")
    holding, release = threading.Event(), threading.Event()

    def holder():
        with ev._one_at_a_time(key):
            holding.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    holding.wait(5)
    started = time.monotonic()
    with lane.bounded(0.3), pytest.raises(lane.LaneBusy, match="another thread's timing"):
        with ev._one_at_a_time(key):
            pass
    assert 0.3 <= time.monotonic() - started < 2.0
    cancel = threading.Event()
    cancel.set()
    with lane.bounded(None, cancel), pytest.raises(lane.Cancelled):
        with ev._one_at_a_time(key):
            pass
    threading.Timer(0.2, release.set).start()
    with ev._one_at_a_time(key):  # unbounded: waits for the holder, then holds it
        assert not t.is_alive() or release.is_set()
    t.join()
