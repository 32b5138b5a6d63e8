"""A kernel right only on the timed calls it can tell are checked: a known hole.

The harness checks the first call, the second input set, the secretly chosen timed call and
the probes (all among the first `min_samples` timed calls) and the last timed call, whose
number follows from the caps when the kernel controls its own times. A kernel that works on
those and hands back a stale answer, paced to look plausible, on the calls between moves the
median unseen: `late_check/stale_between.c` is OK at 3.0x naive on dgemv (3 seeds, 2-core
AMD EPYC Zen 4). Its gain is bounded by the machine's plausible GFLOP/s and memory roofs.

A fix was built and measured (commit f06beff, reverted): two more timed calls drawn from all
of them after the loop (reservoir sampling), their whole state copied between a call's marker
and a new "@s" marker. It caught the kernel on every seed, but doubled the evaluation's wall
time on dgemv (2.03x naive, 1.81x expert) and made transpose's naive kernel at 4096x4096 a
TIMEOUT: the copies and snapshot files of every array, inputs included. What would cost less:
copy only the outputs (the attack pays where the output is small against the work) and log
each later call's one-element input changes, so the parent rebuilds the inputs from the last
probe's snapshot. Until then this test fails, as a strict xfail: it must pass once fixed."""
import re
from pathlib import Path

import pytest

from perfgym import EvalConfig, Status, evaluate, get_task

KERNEL = Path(__file__).parent / "late_check" / "stale_between.c"
# the caps the kernel counts on: 1 warm-up, 40 timed calls, no stop on precision or time
CAPS = EvalConfig(use_cache=False, compare_baseline=False, timeout=30.0, warmup_min=1,
                  warmup_time=0.0, min_samples=5, max_samples=40, max_time=60.0,
                  median_precision=0.0)
SIZE = {"M": 1024, "N": 1024}


@pytest.mark.xfail(strict=True, reason="known hole: no timed call between the first few and "
                   "the last is checked (the fix measured too costly: see the docstring)")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_stale_call_between_the_checked_ones_is_caught(seed):
    outcome = evaluate(get_task("dgemv"), KERNEL.read_text(), SIZE, CAPS.replace(seed=seed))
    assert outcome.status is Status.WRONG_ANSWER, f"{outcome.status}: {outcome.message}"
    assert re.match(r"wrong answer on .*timed call", outcome.message), outcome.message


def test_honest_kernels_pass_under_the_same_caps():
    """The caps the hole needs are ones an honest kernel is timed under too."""
    task = get_task("dgemv")
    for kernel in (task.baseline, task.expert):
        outcome = evaluate(task, kernel.read_text(), SIZE, CAPS.replace(seed=4))
        assert outcome.status is Status.OK, outcome.message
        assert len(outcome.timing.samples) == 40
