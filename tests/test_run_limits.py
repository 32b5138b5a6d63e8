"""The timed run's wall limit is --timeout for the kernel plus an allowance for the harness's own
work on the arrays (build.harness_allowance): big arrays cost the harness seconds around the
calls (inputs read, outputs and snapshots written, fresh memory touched), and a kernel is not
timed out by that bookkeeping. A kernel that never ends still is."""
import pytest

from perfgym import EvalConfig, Status, evaluate, get_task
from perfgym.backends.c.build import harness_allowance, run_limits


def test_the_allowance_follows_the_arrays():
    transpose, dot = get_task("transpose"), get_task("dot")
    big, small = {"N": 4096, "M": 4096}, {"N": 1000}
    config = EvalConfig(timeout=8.0)
    assert harness_allowance(transpose, big) >= 10  # 256 MB of arrays
    assert harness_allowance(dot, small) < 0.01
    assert run_limits(transpose, big, config).wall_seconds == pytest.approx(
        8.0 + harness_allowance(transpose, big))
    assert run_limits(dot, small, config).wall_seconds == pytest.approx(8.0, abs=0.01)


@pytest.mark.slow
def test_an_honest_kernel_on_big_arrays_is_not_timed_out_by_the_harness_s_own_work():
    """The naive transpose at 4096 x 4096 with a 3 s timeout: its calls take about 2 s in all
    (0.13 s each), the harness's own work about 6 s on a 2-core AMD EPYC VM. Without the
    allowance it was TIMEOUT there (the allowance set to 0: this test and the one above fail)."""
    task = get_task("transpose")
    config = EvalConfig(use_cache=False, compare_baseline=False, threads=1, timeout=3.0)
    outcome = evaluate(task, task.baseline.read_text(), {"N": 4096, "M": 4096}, config)
    assert outcome.status == Status.OK, outcome.message


SPIN = """
void transpose_optimized(double *A, double *B, int N, int M) {
    volatile long spin = 0;
    for (;;) spin++;
}
"""


@pytest.mark.slow
def test_a_kernel_that_never_ends_is_still_timed_out():
    task = get_task("transpose")
    config = EvalConfig(use_cache=False, compare_baseline=False, threads=1, timeout=2.0)
    outcome = evaluate(task, SPIN, {"N": 64, "M": 64}, config)
    assert outcome.status == Status.TIMEOUT, outcome.message
    assert "did not finish within 2 s" in outcome.message
