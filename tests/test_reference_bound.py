"""The task's reference is bounded in time and runs outside the timing lane: tiny arrays with
an enormous sweep count (jacobi2d T=10^7) are a size the reference cannot check (a TaskError that
names the bound), and while the reference runs another evaluation can time its kernel."""
import shutil
import threading
import time

import numpy as np
import pytest

from perfgym import EvalConfig, evaluate, get_task
from perfgym.evaluate import measure, prepare
from perfgym.lane import LANE
from perfgym.tasks import TaskError, load_task
from perfgym.verify import ReferenceTooSlow, reference_outputs


def reference_running() -> bool:
    return any(t.name == "perfgym-reference" for t in threading.enumerate())


def stopped_soon() -> bool:
    """The reference's thread ends at its next Python step once its caller gave up."""
    end = time.monotonic() + 5
    while reference_running() and time.monotonic() < end:
        time.sleep(0.01)
    return not reference_running()

SLOW = {"N": 3, "M": 3, "T": 10_000_000}  # 72 bytes of arrays, ~50 s of NumPy reference
QUICK = EvalConfig(compare_baseline=False, use_cache=False, timeout=1.0, max_time=0.1,
                   min_samples=3, max_samples=5)  # the reference may take 4 s


def test_a_reference_too_slow_at_the_size_is_a_task_error_naming_the_bound():
    task = get_task("jacobi2d")
    started = time.monotonic()
    with pytest.raises(ReferenceTooSlow) as caught:
        evaluate(task, task.baseline.read_text(), SLOW, QUICK)
    took = time.monotonic() - started
    assert isinstance(caught.value, TaskError)  # the size's fault, not the candidate's
    assert str(caught.value) == ("the reference took longer than 4 s at N=3,M=3,T=10000000: "
                                 "choose smaller sizes")
    assert took < 30  # not the reference's ~50 s
    assert stopped_soon()


def test_the_timing_lane_is_free_while_the_reference_runs():
    task = get_task("jacobi2d")
    # a 12 s bound: time for other processes' timed runs, which share the machine-wide lane
    p = prepare(task, task.baseline.read_text(), SLOW, QUICK.replace(timeout=3.0))
    raised: list[BaseException] = []

    def evaluate_slow() -> None:
        try:
            measure(p)
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=evaluate_slow)
    worker.start()
    deadline = time.monotonic() + 30
    while not reference_running() and time.monotonic() < deadline:
        time.sleep(0.01)  # the check call, then the reference
    assert reference_running(), "the reference should be running"
    waited = time.monotonic()
    with LANE.exclusive():  # what another evaluation's timed run takes
        waited = time.monotonic() - waited
        during = reference_running()
    worker.join(60)
    assert during, f"the lane came after the reference ({waited:.1f} s)"
    assert len(raised) == 1 and isinstance(raised[0], ReferenceTooSlow)
    assert stopped_soon()


def test_a_bounded_reference_gives_the_same_answer():
    task = get_task("jacobi2d")
    size = {"N": 64, "M": 48, "T": 5}
    grid = np.random.default_rng(3).random((64, 48))
    direct = reference_outputs(task, {"in": grid}, size)
    bounded = reference_outputs(task, {"in": grid}, size, limit=30)
    assert np.array_equal(direct["out"], bounded["out"])
    assert direct["out"].dtype == bounded["out"].dtype


@pytest.fixture
def broken_task(tmp_path):
    task_dir = tmp_path / "jacobi_broken"
    shutil.copytree(get_task("jacobi2d").directory, task_dir)
    (task_dir / "reference.py").write_text("def reference(**a):\n    return 1 / 0\n")
    return task_dir


def test_a_failing_reference_is_a_task_error_not_a_verdict(broken_task):
    task = load_task(broken_task)
    with pytest.raises(TaskError, match="ZeroDivisionError: division by zero"):
        reference_outputs(task, {"in": np.ones((4, 4))}, {"N": 4, "M": 4, "T": 1}, limit=30)
    with pytest.raises(TaskError, match="ZeroDivisionError"):
        evaluate(task, task.baseline.read_text(), {"N": 8, "M": 8, "T": 2}, QUICK)


def test_a_batch_finishes_the_others_then_raises_the_task_fault():
    from perfgym.executors import Request, evaluate_many
    task = get_task("jacobi2d")
    seen = []
    ok = Request(task, task.baseline.read_text(), {"N": 16, "M": 16, "T": 2}, QUICK)
    slow = Request(task, task.baseline.read_text(), SLOW, QUICK)
    with pytest.raises(ReferenceTooSlow):
        evaluate_many([slow, ok], on_result=lambda i, o: seen.append((i, o.status.value)))
    assert seen == [(1, "OK")]  # the good request got its verdict; the bad one none
    assert stopped_soon()


def test_the_cli_says_the_size_is_too_much_for_the_reference():
    """The baseline, the naive and the expert kernel at a size whose reference runs ~50 s, with
    a 4 s bound (--timeout 1): one line, exit 2, after the bound and the builds. It took 3 x 2
    bounds before (each evaluation waited for the reference ahead of its check call, then again
    in the check; the batch's three evaluations each did): 226 s at the default 32 s bound."""
    import subprocess
    import sys
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", "--task", "jacobi2d",
                        "--size", "N=3,M=3,T=10000000", "--timeout", "1", "--no-cache"],
                       capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: the reference took longer than 4 s at N=3,M=3,T=10000000: choose smaller sizes"
    ], r.stderr
    assert 4 <= took < 4 + 8, took  # the bound, once, and the start-up and one build


def test_the_bound_is_waited_for_once_per_size(monkeypatch):
    """One evaluation waits for its bound once (not for the reference computed ahead of the
    check call and then again in it); the next at that size is told at once, for
    TOO_SLOW_SECONDS."""
    task = get_task("jacobi2d")
    size = {"N": 3, "M": 4, "T": 10_000_000}  # a size no other test here uses
    config = QUICK  # a 4 s bound
    took = []
    for _ in range(2):
        started = time.monotonic()
        with pytest.raises(ReferenceTooSlow, match="longer than 4 s at N=3,M=4,T=10000000"):
            evaluate(task, task.baseline.read_text(), size, config)
        took.append(time.monotonic() - started)
    assert 4 <= took[0] < 4 + 3.5, took  # not 2 x 4 s
    assert took[1] < 3, took  # the build only
    # a longer bound tries again
    assert not reference_running()
    with pytest.raises(ReferenceTooSlow, match="longer than 6 s"):
        evaluate(task, task.baseline.read_text(), size, QUICK.replace(timeout=1.5))
    assert stopped_soon()
    # past TOO_SLOW_SECONDS the size is tried again (a busy moment is not held against it)
    import perfgym.verify
    monkeypatch.setattr(perfgym.verify, "TOO_SLOW_SECONDS", 0.0)
    started = time.monotonic()
    with pytest.raises(ReferenceTooSlow):
        evaluate(task, task.baseline.read_text(), size, config)
    assert time.monotonic() - started >= 4
    assert stopped_soon()
