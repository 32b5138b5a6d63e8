"""Foreign load is seen: a timed run during which other programs took the CPU the kernel needed
is repeated, and if every run was disturbed the Outcome says so, the message says so, the
reward schemes refuse it and the cache does not keep it. A quiet run is not flagged; a kept
timing carries its conditions; baselines follow use_cache.

The hog test runs real busy processes for a few seconds: it makes other timings on the machine
noisy while it runs, so it is one test, kept short."""
import os
import subprocess
import sys
import time

import pytest

from perfgym import EvalConfig, Status, evaluate
from perfgym.backends.c import neighbours
from perfgym.cache import OutcomeCache
from perfgym.evaluate import baseline, finish, measure, prepare, recent_baseline
from perfgym.outcome import Outcome
from perfgym.rewards import SCHEMES, score

SIZE = {"M": 160, "N": 160, "K": 160}  # the naive kernel: a run of a few tenths of a second
CONFIG = EvalConfig(compare_baseline=False, timeout=6.0, max_time=0.3, max_samples=20,
                    min_samples=5)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    ev = sys.modules["perfgym.evaluate"]  # the package exports a function of the same name
    fresh = OutcomeCache(tmp_path / "outcomes.sqlite")
    monkeypatch.setattr(ev, "_cache", fresh)
    return fresh


def hogs(count: int) -> list[subprocess.Popen]:
    # each in a session of its own, as other users' programs are: with autogroup scheduling
    # (Linux's default) hogs sharing one session share one fair share, whatever their number
    return [subprocess.Popen([sys.executable, "-c", "while 1: pass"], start_new_session=True)
            for _ in range(count)]


def test_a_run_beside_cpu_hogs_is_flagged_and_not_cached(dgemm, cache):
    p = prepare(dgemm, dgemm.baseline.read_text(), SIZE, CONFIG)  # built before the hogs start
    assert p.key is not None
    cores = len(os.sched_getaffinity(0))
    busy = hogs(3 * cores)  # the kernel's core shared by about four
    try:
        time.sleep(0.3)
        o = finish(p, measure(p))
    finally:
        for h in busy:
            h.kill()
            h.wait()
    assert o.status is Status.OK, o.message
    load = o.parent_check["load"]
    assert o.disturbed and "other programs used" in o.disturbed, load
    assert load["attempts"] == 3  # run again twice before giving up
    assert load["others_cpu"] > load["cpu"] and load["others_running"] >= 1
    assert "DISTURBED" in o.message and o.to_dict()["disturbed"] == o.disturbed
    assert cache.get(p.key) is None and len(cache) == 0


def test_a_quiet_run_is_not_flagged_and_is_cached_with_its_conditions(dgemm, cache):
    for _ in range(5):  # a passing burst of load flags one evaluation, not five
        o = evaluate(dgemm, dgemm.baseline.read_text(), SIZE, CONFIG)
        assert o.ok, o.message
        if not o.disturbed:
            break
        # flagged (CI shares its machine): only with figures that show the run starved by others
        load = o.parent_check["load"]
        missed = load["possible"] - load["cpu"]
        assert missed > 0.5 * load["possible"], load
        assert load["others_cpu"] + load["steal"] >= 0.5 * missed, load
    assert o.disturbed is None, o.parent_check["load"]
    assert "DISTURBED" not in o.message
    kept = evaluate(dgemm, dgemm.baseline.read_text(), SIZE, CONFIG)
    assert kept.cached
    load = kept.parent_check["load"]
    assert load["cpu"] > 0 and load["wall"] >= load["cpu"] * 0.5 and load["attempts"] >= 1
    assert {"others_cpu", "steal", "others_running", "cores"} <= set(load)


def test_baseline_follows_use_cache(dgemm, cache):
    small = {"M": 48, "N": 48, "K": 48}
    first = baseline(dgemm, small, CONFIG.replace(use_cache=False))
    again = baseline(dgemm, small, CONFIG.replace(use_cache=False))
    assert first.ok and again.ok and not first.cached and not again.cached
    assert len(cache) == 0  # nothing kept: a baseline timed under load would outlive the load
    assert again.timing.samples != first.timing.samples  # timed twice
    kept = baseline(dgemm, small, CONFIG)
    assert not kept.cached
    if kept.disturbed:  # the machine was busy: not kept either
        assert len(cache) == 0
    else:
        assert len(cache) == 1 and baseline(dgemm, small, CONFIG).cached


def test_candidates_in_a_row_share_a_recent_undisturbed_baseline(dgemm, cache, monkeypatch):
    ev = sys.modules["perfgym.evaluate"]
    monkeypatch.setattr(ev, "_recent", {})
    small, cfg = {"M": 48, "N": 48, "K": 48}, CONFIG.replace(use_cache=False)
    for _ in range(5):  # a passing burst of load disturbs one baseline, not five
        first = recent_baseline(dgemm, small, cfg)
        if not first.disturbed:
            break
        assert recent_baseline(dgemm, small, cfg) is not first  # disturbed: never shared
    assert not first.disturbed, first.parent_check["load"]
    assert recent_baseline(dgemm, small, cfg) is first  # within BASELINE_FRESH_SECONDS
    assert recent_baseline(dgemm, {"M": 40, "N": 48, "K": 48}, cfg) is not first  # other size
    # (another kernel than the baseline: the baseline's own code is 1x by definition)
    from perfgym.train.pairs import VARIANTS_DIR
    ikj = (VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text()
    candidate = finish(p := prepare(dgemm, ikj, small, cfg.replace(compare_baseline=True)),
                       measure(p))
    assert candidate.speedup == first.timing.median / candidate.timing.median
    assert len(cache) == 0  # shared in the process, never kept
    monkeypatch.setattr(ev, "BASELINE_FRESH_SECONDS", 0.0)  # too old: timed again
    again = recent_baseline(dgemm, small, cfg)
    assert again is not first and again.timing.samples != first.timing.samples

    def disturbed_baseline(*args):
        o = baseline(*args)
        o.disturbed = "others held the CPU (as the neighbour check reports it)"
        return o
    monkeypatch.setattr(ev, "BASELINE_FRESH_SECONDS", 30.0)
    monkeypatch.setattr(ev, "_recent", {})
    monkeypatch.setattr(ev, "baseline", disturbed_baseline)
    one, two = recent_baseline(dgemm, small, cfg), recent_baseline(dgemm, small, cfg)
    assert one.disturbed and two.disturbed and one is not two  # never shared
    monkeypatch.setattr(ev, "baseline", baseline)
    kept = cfg.replace(use_cache=True)  # with the cache on, the cache keeps it instead
    assert recent_baseline(dgemm, small, kept) is not recent_baseline(dgemm, small, kept)
    assert len(cache) == 1


def figures(cpu, wall, others, cores=1, steal=0.0):
    return {"wall": wall, "cores": cores, "cpu": cpu, "possible": cores * wall,
            "others_cpu": others, "steal": steal, "others_running": 1}


def test_the_rule_needs_strong_evidence():
    # a serial kernel that kept its core while a compiler used the other one: not disturbed
    assert neighbours.disturbed(figures(cpu=0.97, wall=1.0, others=1.0)) is None
    # a serial kernel beside two busy processes on two cores: two thirds of its core, no
    assert neighbours.disturbed(figures(cpu=0.67, wall=1.0, others=1.33)) is None
    # an OpenMP kernel whose serial parts left a core idle, a little background load: no
    assert neighbours.disturbed(figures(cpu=1.4, wall=1.0, others=0.2, cores=2)) is None
    # a tiny run: clock-tick rounding is not evidence
    assert neighbours.disturbed(figures(cpu=0.01, wall=0.03, others=0.05)) is None
    # less than half its CPU, and the shortfall went to others (or to the hypervisor)
    assert "1.60 CPU-s" in neighbours.disturbed(figures(cpu=0.4, wall=1.0, others=1.6))
    assert "stolen" in neighbours.disturbed(figures(cpu=0.9, wall=1.0, others=0.1, cores=2,
                                                    steal=0.9))
    # an OpenMP kernel whose threads waited for cores two busy processes held
    assert neighbours.disturbed(figures(cpu=0.9, wall=1.0, others=1.1, cores=2))
    # short of CPU with nobody else busy (the harness's own serial work): no
    assert neighbours.disturbed(figures(cpu=0.8, wall=1.0, others=0.05, cores=2)) is None


def test_snapshots_see_this_process_and_the_machine():
    before = neighbours.snapshot()
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        pass
    c = neighbours.conditions(before, neighbours.snapshot(), threads=1)
    assert 0.01 < c["cpu"] <= c["wall"] + 0.01  # this thread's busy loop, to the millisecond
    assert c["possible"] == pytest.approx(c["wall"]) and c["cores"] == 1
    assert c["others_cpu"] >= 0 and c["steal"] >= 0
    # whenever the loop was not running, a CPU it may use was busy with someone else's work
    assert c["cpu"] + c["others_cpu"] + c["steal"] >= 0.8 * c["wall"]


def test_reward_schemes_refuse_a_disturbed_timing_by_default():
    def ok(gflops, disturbed=None):
        return Outcome(Status.OK, "dgemm", SIZE, gflops=gflops, speedup=gflops / 2.0,
                       disturbed=disturbed)
    group = [ok(40.0), ok(0.4, "other programs used 1.90 CPU-s ..."), ok(20.0)]
    for scheme in SCHEMES:
        rewards = score(scheme, group)
        assert rewards[1] != rewards[1], scheme  # NaN: no reward
        assert rewards[0] == score(scheme, [group[0], group[2]])[0]  # left out of the group
        kept = score(scheme, group, refuse_disturbed=False)
        assert kept[1] == kept[1] and kept[0] >= kept[1], scheme
    assert score("group_normalized", [ok(1.0, "busy"), ok(0.5)], refuse_disturbed=False) \
        == [100.0, 50.0]
