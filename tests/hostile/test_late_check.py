"""A kernel right only on the timed calls it can tell are checked.

The harness checks the first call, the second input set, the secretly chosen timed call and
the probes (all among the first `min_samples` timed calls) and the last timed call, whose
number follows from the caps when the kernel controls its own times. A kernel that works on
those and hands back a stale answer, paced to look plausible, on the calls between moves the
median unseen: `late_check/stale_between.c` passed as OK at about 3x naive. Now two more timed
calls are checked, drawn from all of them once the loop is over (reservoir sampling in the
harness: `late_slot`), so each of its stale calls is checked with chance 2/40 and each
evaluation finds one of its 34 with chance about 98%."""
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
STALE = range(6, 40)  # timed calls 6-39 in the message's counting from 1 (indices 5-38)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_stale_call_between_the_checked_ones_is_caught(seed):
    outcome = evaluate(get_task("dgemv"), KERNEL.read_text(), SIZE, CAPS.replace(seed=seed))
    assert outcome.status is Status.WRONG_ANSWER, f"{outcome.status}: {outcome.message}"
    m = re.match(r"wrong answer on timed call (\d+) of 40 \(one of 2 drawn at random from all "
                 r"of them\): ", outcome.message)
    assert m, outcome.message
    assert int(m.group(1)) in STALE


def test_honest_kernels_pass_the_late_checks_under_the_same_caps():
    task = get_task("dgemv")
    for kernel in (task.baseline, task.expert):
        outcome = evaluate(task, kernel.read_text(), SIZE, CAPS.replace(seed=4))
        assert outcome.status is Status.OK, outcome.message
        assert len(outcome.timing.samples) == 40
