"""The speed reward (rewards.speed) on kernels the gym really evaluated: a copy of the naive
kernel earns exactly 0, whatever its two timings said; every failure earns less than every
correct kernel; a clearly faster kernel earns ln(speedup)."""
import math

import pytest

from perfgym import EvalConfig, evaluate, get_task
from perfgym.outcome import Outcome, Status
from perfgym.rewards import score

TIMED = EvalConfig(use_cache=False, timeout=3.0, max_time=0.2, max_samples=10, min_samples=3)


@pytest.fixture(scope="module")
def judged():
    task = get_task("dgemm")
    naive = task.baseline.read_text()
    renamed = "/* the same kernel, reformatted */\n" + naive.replace("\n", "\n\n")
    wrong = naive.replace("C[i * N + j] = sum;", "C[i * N + j] = sum * 1.01;")
    assert wrong != naive
    answers = {"naive": naive, "reformatted": renamed, "expert": task.expert.read_text(),
               "wrong": wrong, "broken": naive.replace("C[i * N + j] = sum;", "C[i * N + j] = sum +;"),
               "no_code": "I cannot help with that."}
    return {name: evaluate(task, text, None, TIMED) for name, text in answers.items()}


def test_a_copy_of_the_naive_kernel_earns_exactly_zero(judged):
    for name in ("naive", "reformatted"):
        o = judged[name]
        assert o.ok and o.speedup == 1.0 and "baseline_copy" in o.flags, (name, o.message)
        assert score("speed", [o]) == [0.0]


def test_every_failure_earns_less_than_every_correct_kernel(judged):
    assert judged["wrong"].status is Status.WRONG_ANSWER
    assert judged["broken"].status is Status.COMPILE_ERROR
    assert judged["no_code"].status is Status.FORMAT_ERROR
    group = list(judged.values())
    rewards = dict(zip(judged, score("speed", group)))
    worst_correct = min(r for n, r in rewards.items() if judged[n].ok)
    assert all(rewards[n] < worst_correct for n in ("wrong", "broken", "no_code"))
    # a wrong answer got further than a compile error, which got further than no code
    assert rewards["wrong"] > rewards["broken"] > rewards["no_code"]
    # and a correct kernel 10x slower than naive still beats the best failure
    slow = Outcome(Status.OK, "dgemm", {}, speedup=0.01)
    assert score("speed", [slow])[0] == pytest.approx(math.log(0.1))
    assert score("speed", [slow])[0] > rewards["wrong"]


def test_a_faster_kernel_earns_the_log_of_its_speedup(judged):
    o = judged["expert"]
    assert o.ok and o.speedup > 2, o.message
    assert score("speed", [o]) == [pytest.approx(math.log(o.speedup))]


def test_speedups_inside_the_noise_band_earn_zero():
    near = [Outcome(Status.OK, "dot", {}, speedup=s) for s in (0.95, 1.0, 1.05, 1.09)]
    assert score("speed", near) == [0.0] * 4
    # a paired bound that does not clear 1 is no speedup either
    unsure = Outcome(Status.OK, "relu", {}, speedup=1.5, speedup_low=0.98)
    assert score("speed", [unsure]) == [0.0]
