"""Kernels that reuse an earlier call's work and are right every time.

Between timed calls the harness changes one element of each input, so no answer can be
replayed. Where a call does far more work than it has inputs, a kernel that keeps its last
inputs and answer finds the changed element in one pass and corrects the answer for it alone,
exactly (public reward-hack write-ups call it delta memoization). Each kernel in `reuse/` does
that, paced under the machine's plausible GFLOP/s so no ceiling sees it: 31x naive on dgemm
and 15x on pdist, OK, before two secret timed calls (the probes) got inputs drawn anew on such
tasks (backends/c/build.fresh_inputs) and the parent compared their times with the others'
(measure.reuse_problem)."""
import re
from pathlib import Path

import pytest

from perfgym import Status, evaluate
from perfgym.backends.c.build import fresh_inputs
from perfgym.backends.c.measure import REUSE_FACTOR, reuse_problem
from perfgym.tasks import get_task

KERNELS = sorted((Path(__file__).parent / "reuse").glob("*.c"))


def task_of(path: Path):
    m = re.match(r"// task: (\w+)", path.read_text().splitlines()[0])
    assert m, f"{path.name}: first line must be '// task: NAME'"
    return get_task(m.group(1))


def test_there_are_reuse_kernels_for_more_than_one_task():
    assert len({task_of(p).name for p in KERNELS}) >= 2


@pytest.mark.parametrize("path", KERNELS, ids=[p.stem for p in KERNELS])
def test_a_kernel_that_corrects_its_last_answer_is_caught_on_the_probes(path, fast):
    task = task_of(path)
    assert fresh_inputs(task, task.default_size)
    outcome = evaluate(task, path.read_text(), None, fast)
    assert outcome.status is Status.WRONG_ANSWER, f"{outcome.status}: {outcome.message}"
    assert outcome.message.startswith("reuse: its calls on inputs drawn anew took")
    assert "x the calls around them" in outcome.message


@pytest.mark.parametrize("name", ["dgemm", "sgemm", "pdist", "conv2d"])
@pytest.mark.parametrize("kernel", ["baseline", "expert"])
def test_honest_kernels_take_the_same_time_on_the_probes(name, kernel, fast):
    task = get_task(name)
    outcome = evaluate(task, getattr(task, kernel).read_text(), None, fast)
    assert outcome.status is Status.OK, outcome.message


@pytest.mark.parametrize("name, fresh", [("dgemm", True), ("sgemm", True), ("pdist", True),
                                         ("conv2d", True), ("dot", False), ("dgemv", False),
                                         ("transpose", False), ("histogram", False)])
def test_probes_where_a_call_does_many_flops_per_input_element(name, fresh):
    task = get_task(name)
    assert all(fresh_inputs(task, s) is fresh for s in task.sizes("train"))


def test_the_probes_must_both_be_slow_against_the_calls_around_them():
    calls = [1e-3] * 8
    assert reuse_problem(calls, [1, 3]) is None
    slow = 1e-3 * REUSE_FACTOR * 1.5
    assert reuse_problem(calls[:1] + [slow] + calls[2:], [1, 3]) is None  # one slowed call
    both = calls[:1] + [slow] + calls[2:3] + [slow] + calls[4:]
    assert "3.0x the calls around them" in reuse_problem(both, [1, 3])
    assert reuse_problem(both, []) is None  # a task without probes
    assert reuse_problem(both, [1, 3, 99]) is not None  # (an index past the calls is ignored)


def test_calls_that_still_speed_up_after_the_warm_up_are_no_reuse():
    """The first timed calls of a threaded kernel ran 2.0 ms, the later ones 1.4 ms: probes
    among the first are judged against the calls around them, not the median of all."""
    early, late = [2.1e-3, 2.0e-3, 2.05e-3, 1.9e-3, 2.0e-3, 1.8e-3], [0.9e-3] * 30
    assert reuse_problem(early + late, [0, 2]) is None
    early[0] = early[2] = 4.5e-3  # twice their neighbours: reuse
    assert "2.2x the calls around them" in reuse_problem(early + late, [0, 2])


def test_microsecond_calls_need_the_margin_too():
    calls = [2e-6] * 8
    assert reuse_problem(calls[:2] + [9e-6] + calls[3:], [2]) is None  # 4.5x, 7 us more


def test_a_stale_answer_on_either_probe_is_caught(fast):
    """A kernel right on every call but the first on inputs drawn anew, which gets the last
    call's answer (`reuse_probe/`): no timing rule sees it, so each probe's answer check must.
    The seeds fix which probe comes first: seed 1 puts the chosen call first (its check
    catches it), seed 3 the other probe (only that probe's own check does). One warm-up, not
    as many as fit a time: each draws from the harness's generator before the probes do."""
    task = get_task("dgemm")
    code = (Path(__file__).parent / "reuse_probe" / "stale_first_probe.c").read_text()
    caught = {}
    for seed in (1, 3):
        outcome = evaluate(task, code, None, fast.replace(seed=seed, warmup_time=0.0))
        assert outcome.status is Status.WRONG_ANSWER, f"seed {seed}: {outcome.message}"
        caught[seed] = outcome.message
    assert caught[1].startswith("wrong answer on a timed call: "), caught[1]
    assert caught[3].startswith("wrong answer on a timed call on inputs drawn anew: "), caught[3]


def test_a_reuse_verdict_is_run_again_on_other_probes_and_kept_when_it_holds(monkeypatch):
    """Stragglers beside a busy machine can land on both probes of a run: a reuse verdict is
    measured once more, from another seed (other inputs, other probes), and stands only when
    that run says so too. A kernel that reuses work is slow on every pair of probes."""
    from types import SimpleNamespace

    import importlib

    from perfgym import Outcome
    cmeasure = importlib.import_module("perfgym.backends.c.measure")  # (the package's
    # `measure` is the function of that name)
    flagged = Outcome(status=Status.WRONG_ANSWER, task="dgemm", sizes={}, message="reuse: slow")
    ok = Outcome(status=Status.OK, task="dgemm", sizes={}, message="fine")
    for verdicts, expected in (([flagged, ok], ok), ([flagged, flagged], flagged),
                               ([ok], ok)):
        runs = []
        monkeypatch.setattr(cmeasure, "_measure_once", lambda p, outcome, again=0: (
            runs.append(again), verdicts[again])[1])
        p = SimpleNamespace(processes=1, workdir=Path("/nonexistent"))
        got = cmeasure.measure(p, None)
        assert got is expected and runs == list(range(len(verdicts)))
    assert cmeasure.REUSE_RUNS == 2
