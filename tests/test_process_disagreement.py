"""Where the baseline's processes disagree (trsm's naive kernel at one size runs in one of two
modes, fixed per process), a candidate's single process against the baseline's median read
1.65x "faster" when the two drew different modes. There the baseline keeps its fastest
process, and the candidate is timed in as many processes and keeps its fastest."""
import dataclasses
import importlib

import pytest

from perfgym import EvalConfig, evaluate, get_task
from perfgym.executors.local import Request, evaluate_many
from perfgym.outcome import Outcome, Status, Timing

ev = importlib.import_module("perfgym.evaluate")
cmeasure = importlib.import_module("perfgym.backends.c.measure")
CONFIG = EvalConfig(max_time=0.2, max_samples=10, min_samples=3)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ev, "_cache", None)
    monkeypatch.setattr(ev, "_recent", {})


def _timed(median, spread=1.0, disagree=False, task="dot"):
    timing = Timing.from_samples([median] * 6, warmups=1, precision=0.02)
    timing.process_medians = [median, median, median * spread]
    timing.processes_disagree = disagree
    return Outcome(Status.OK, task, {"N": 1}, "ok", timing=timing)


def _plant_baseline(task, size, outcome):
    key = ev._baseline_cache_key(task, size, ev._baseline_config(CONFIG))
    ev.outcome_cache().put(key, outcome)
    return key


def test_a_size_that_disagreed_is_treated_so_for_the_memorys_timings(fresh_cache, monkeypatch):
    """Three processes that agree may all have drawn one mode: after a timing whose processes
    disagreed, the next DISAGREEMENT_MEMORY timings keep their fastest process too, and the one
    after them, agreeing still, keeps the middle one again. A new disagreement starts it over."""
    task, size = get_task("dot"), {"N": 1}
    _plant_baseline(task, size, _timed(0.1, spread=1.5))  # (as a timing before this field)
    agreeing = (0.104, 0.100, 0.102)

    def retime(medians):
        given = iter([_timed(m) for m in medians])
        monkeypatch.setattr(ev, "evaluate", lambda *a, **k: next(given))
        return ev.retime_baseline(task, size, CONFIG)

    kept = [retime(agreeing) for _ in range(ev.DISAGREEMENT_MEMORY + 1)]
    assert [b.timing.timings_since_disagreement for b in kept] == \
        list(range(1, ev.DISAGREEMENT_MEMORY + 1)) + [None]
    assert [b.timing.median for b in kept] == [0.100] * ev.DISAGREEMENT_MEMORY + [0.102]
    assert not kept[-1].timing.processes_disagree and not retime(agreeing).timing.processes_disagree
    again = retime((0.10, 0.13, 0.101))
    assert again.timing.timings_since_disagreement == 0 and again.timing.median == 0.10
    assert retime(agreeing).timing.timings_since_disagreement == 1
    # an agreeing size stays agreeing
    _plant_baseline(task, size, _timed(0.1, spread=1.02))
    assert retime(agreeing).timing.timings_since_disagreement is None


def test_a_candidate_is_timed_in_as_many_processes_where_the_baseline_disagreed(fresh_cache):
    """Real runs: against a baseline whose processes disagreed, the expert is timed in
    BASELINE_PROCESSES processes, each verified, and keeps the fastest."""
    task = get_task("dot")
    size = {"N": 200_000}  # (small: quick)
    _plant_baseline(task, size, _timed(0.01, spread=1.6, disagree=True))
    three = evaluate(task, task.expert.read_text(), size, CONFIG)
    assert three.ok, three.message
    medians = three.timing.process_medians
    assert medians is not None and len(medians) == ev.BASELINE_PROCESSES
    assert medians == sorted(medians) and three.timing.median == medians[0]
    assert three.speedup == pytest.approx(0.01 / medians[0])


def test_a_candidate_is_timed_in_one_process_where_the_baseline_agreed(fresh_cache):
    task = get_task("dot")
    size = {"N": 200_000}  # (small: quick)
    _plant_baseline(task, size, _timed(0.01, spread=1.01))
    one = evaluate(task, task.expert.read_text(), size, CONFIG)
    assert one.ok and one.timing.process_medians is None
    assert one.speedup == pytest.approx(0.01 / one.timing.median)


def test_a_batch_passes_its_baseline_to_the_measure(fresh_cache):
    """The batch times its baseline first and each candidate is timed by that one's verdict
    (not one timed again between)."""
    task = get_task("dot")
    size = {"N": 200_000}  # (small: quick)
    _plant_baseline(task, size, _timed(0.01, spread=1.6, disagree=True))
    [out] = evaluate_many([Request(task, task.expert.read_text(), size, CONFIG)])
    assert out.ok and len(out.timing.process_medians) == ev.BASELINE_PROCESSES


def _prepared(task, tmp_path, processes):
    from perfgym.backends import Prepared
    p = Prepared(task, "", dict(task.default_size), CONFIG, {}, 0.0, workdir=tmp_path)
    p.processes = processes
    return p


def test_a_process_that_fails_is_the_verdict(tmp_path, monkeypatch):
    """Every process is checked in full: a kernel right in the first and wrong in the second
    is wrong, whatever the first one's time."""
    wrong = Outcome(Status.WRONG_ANSWER, "dot", {"N": 1}, "wrong at 3 of 1000 points")
    given = iter([_timed(0.05), wrong, _timed(0.04)])
    monkeypatch.setattr(cmeasure, "_measure_once", lambda p, o: next(given))
    assert cmeasure.measure(_prepared(get_task("dot"), tmp_path, 3), None) is wrong


def test_no_file_of_one_process_is_read_as_the_next_ones(tmp_path, monkeypatch):
    """The harness writes its outputs and report into the work directory: before the second
    process runs, the first one's are gone (a kernel that ended its process early must not
    be judged by the last process's outputs)."""
    seen = []

    def once(p, outcome):
        seen.append(sorted(f.name for f in p.workdir.iterdir()))
        for name in ("result.txt", "out1_x.bin", "out2_x.bin", "snap_1.bin"):
            (p.workdir / name).write_text("from this process")
        return _timed(0.05 + 0.01 * len(seen))

    (tmp_path / "run").write_text("the build")
    monkeypatch.setattr(cmeasure, "_measure_once", once)
    kept = cmeasure.measure(_prepared(get_task("dot"), tmp_path, 3), None)
    assert seen == [["run"]] * 3
    assert kept.timing.median == pytest.approx(0.06)
    assert kept.timing.process_medians == pytest.approx([0.06, 0.07, 0.08])


def test_one_disturbed_process_marks_the_candidate(tmp_path, monkeypatch):
    disturbed = dataclasses.replace(_timed(0.03), disturbed="the host stole 40% of a core")
    given = iter([_timed(0.05), disturbed, _timed(0.04)])
    monkeypatch.setattr(cmeasure, "_measure_once", lambda p, o: next(given))
    kept = cmeasure.measure(_prepared(get_task("dot"), tmp_path, 3), None)
    assert kept.timing.median == 0.03 and "stole" in kept.disturbed
