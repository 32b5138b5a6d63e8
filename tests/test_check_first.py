"""Check before timing: a wrong kernel costs one verified call, not the timing loop, and the
check run is no way around the full protocol's checks."""
from perfgym.evaluate import measure, prepare
from perfgym.outcome import Status

NAIVE_BODY = """
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    %s
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++) sum += A[i * K + k] * B[k * N + j];
            C[i * N + j] = sum %s;
        }
}
"""


def kernel(prologue: str = "", bias: str = "") -> str:
    return "```c\n#include <stddef.h>\n" + NAIVE_BODY % (prologue, bias) + "```"


def run(task, text, config, size=None):
    prepared = prepare(task, text, size or {"M": 64, "N": 64, "K": 64}, config)
    assert not hasattr(prepared, "status"), prepared.message
    return prepared, measure(prepared)


def test_wrong_kernel_never_reaches_the_timing_run(dgemm, fast):
    p, o = run(dgemm, kernel(bias="+ 1e-3"), fast)
    assert o.status is Status.WRONG_ANSWER
    assert "first input set" in o.message and o.timing is None
    assert "check" in p.seconds and "run" not in p.seconds


def test_correct_kernel_is_checked_then_timed(dgemm, fast):
    p, o = run(dgemm, kernel(), fast)
    assert o.status is Status.OK, o.message
    assert {"check", "run"} <= set(p.seconds)
    assert len(o.timing.samples) >= fast.min_samples


def test_check_off_runs_the_whole_protocol_once(dgemm, fast):
    p, o = run(dgemm, kernel(bias="+ 1e-3"), fast.replace(extra={"check_first": False}))
    assert o.status is Status.WRONG_ANSWER
    assert "run" in p.seconds and "check" not in p.seconds


def test_right_only_on_a_process_first_call_fails_after_timing(dgemm, fast):
    # Each harness process starts its statics afresh: the check run's one call and the full
    # run's first call are both "first". The timed calls and the second set still expose it.
    p, o = run(dgemm, kernel(prologue="static int calls; calls++;",
                           bias="+ (calls > 1)"), fast)
    assert o.status is Status.WRONG_ANSWER, o.message
    assert "run" in p.seconds
    assert "first input set" not in o.message


def test_wrong_only_in_the_check_run_is_still_wrong(dgemm, fast):
    # A kernel cannot tell the check run from the full run by its arguments, but one that is
    # wrong on its first call anywhere fails at the check and never gets timed.
    p, o = run(dgemm, kernel(prologue="static int calls; calls++;",
                           bias="+ (calls == 1)"), fast)
    assert o.status is Status.WRONG_ANSWER
    assert "run" not in p.seconds


def test_crash_in_the_check_run_is_reported_like_any_crash(dgemm, fast):
    p, o = run(dgemm, kernel(prologue="C[-100000000] = 1.0;"), fast)
    assert o.status is Status.RUNTIME_ERROR and "SIGSEGV" in o.message
    assert "run" not in p.seconds


def test_slow_wrong_kernel_costs_one_call_not_the_loop(dgemm, fast):
    # At 256^3 the naive kernel takes tens of ms per call and the full protocol runs many calls:
    # the check alone must take a small part of what the full run of the same kernel takes.
    size = {"M": 256, "N": 256, "K": 256}
    config = fast.replace(max_time=1.0, max_samples=30, min_samples=10, median_precision=0.0)
    p_wrong, o_wrong = run(dgemm, kernel(bias="+ 1e-3"), config, size)
    p_right, o_right = run(dgemm, kernel(), config, size)
    assert o_wrong.status is Status.WRONG_ANSWER and o_right.status is Status.OK
    assert p_wrong.seconds["check"] < 0.5 * p_right.seconds["run"], (p_wrong.seconds,
                                                                     p_right.seconds)


# ---- the timed run's harness, started beside the check call ------------------------------------

def test_a_prestarted_harness_runs_nothing_before_the_word_and_ends_without_it(dgemm, fast):
    """Started with `go FD`, the harness loads, says "@r 0" and waits: no calibration marker,
    no kernel call, no output until the parent sends the word. Without it (the pipe closed, as
    after a wrong check call) it ends with status 4, and its directory goes."""
    import time

    import numpy as np

    from perfgym.backends.c import build as cbackend
    from perfgym.backends.c.prestart import PrestartedRun
    p = prepare(dgemm, kernel(), {"M": 32, "N": 32, "K": 32}, fast)
    try:
        rng = np.random.default_rng(1)
        inputs = cbackend.InputSets([cbackend.make_inputs(dgemm, p.size, rng) for _ in range(2)])
        cbackend.write_manifest(dgemm, p.size, inputs, fast, p.workdir, 7)
        waiting = PrestartedRun(p)
        waiting.wait_ready()
        assert waiting.thread.is_alive()  # ready, not ended
        time.sleep(0.3)
        assert not (waiting.workdir / "result.txt").exists()
        assert not list(waiting.workdir.glob("out*_*.bin"))
        waiting.close()
        assert waiting.result.returncode == 4, waiting.result
        assert [m for _, m in waiting.result.markers] == ["@r 0"]  # no "@c", no "@t"
        assert not waiting.workdir.exists()
    finally:
        p.backend.cleanup(p)


def test_the_timed_runs_limit_counts_from_the_word_not_from_its_start(dgemm, fast):
    """A harness started beside the check call may wait for the timing lane longer than the
    whole timeout (another candidate is being timed): that wait is no TIMEOUT. A kernel that
    runs past the timeout after the word is one."""
    import threading
    import time

    from perfgym.lane import LANE
    config = fast.replace(timeout=1.0)
    held, release = threading.Event(), threading.Event()

    def hold_the_lane():
        with LANE.exclusive():
            held.set()
            release.wait(30)
    p = prepare(dgemm, kernel(), {"M": 64, "N": 64, "K": 64}, config)
    holder = threading.Thread(target=hold_the_lane)
    results = {}
    worker = threading.Thread(target=lambda: results.update(outcome=measure(p)))
    try:
        worker.start()
        deadline = time.monotonic() + 20  # the check call over (it takes the shared lane)
        while "check" not in p.seconds and time.monotonic() < deadline:
            time.sleep(0.005)
        holder.start()
        assert held.wait(10)
        time.sleep(1.5)  # longer than the timeout, while the harness waits for the word
    finally:
        release.set()
        worker.join(60)
        holder.join(10)
    o = results["outcome"]
    assert o.status is Status.OK, o.message
    assert p.seconds["run"] < 1.0  # timed from the word
    # fast in the check call and in the first call, then a spin in every later call
    later = kernel(prologue="static int calls = 0;\n    if (calls++ > 0) "
                            "for (volatile long s = 0; s < 40000000000L; s++) {}")
    started = time.monotonic()
    _, o = run(dgemm, later, fast.replace(timeout=2.0))
    assert o.status is Status.TIMEOUT, o.message
    assert time.monotonic() - started < 20


# ---- a run that stops after the check call makes the first input set only ----------------------

def test_a_check_only_run_makes_one_input_set_and_cannot_be_timed_on_it(dgemm, fast,
                                                                       monkeypatch):
    """A first pass (CHECK_ONLY) makes and writes only the set its check call uses. Its
    manifest names /dev/null for the second set, so the whole protocol on that manifest ends
    unable to read its inputs: it is never timed, or checked a second time, on the first set
    again."""
    import numpy as np

    from perfgym.backends.c import build as cbackend
    from perfgym.outcome import CHECK_ONLY
    written = []
    real_write = cbackend.write_manifest

    def write_manifest(task, size, inputs, config, workdir, seed):
        real_write(task, size, inputs, config, workdir, seed)
        written.append((len(inputs.sets), sorted(f.name for f in workdir.glob("in*_*.bin"))))
    monkeypatch.setattr(cbackend, "write_manifest", write_manifest)
    p, o = run(dgemm, kernel(), fast.replace(extra={CHECK_ONLY: True}))
    assert o.status is Status.OK and CHECK_ONLY in o.flags, o.message
    assert written == [(1, ["in1_0.bin", "in1_1.bin"])]  # A and B of set 1 only
    assert "run" not in p.seconds  # no timed run
    p, o = run(dgemm, kernel(), fast)  # a whole evaluation makes both
    assert o.status is Status.OK and written[1] == (2, ["in1_0.bin", "in1_1.bin", "in2_0.bin",
                                                        "in2_1.bin"])
    monkeypatch.undo()

    p = prepare(dgemm, kernel(), {"M": 32, "N": 32, "K": 32}, fast)
    try:
        one = cbackend.InputSets([cbackend.make_inputs(dgemm, p.size, np.random.default_rng(2))])
        cbackend.write_manifest(dgemm, p.size, one, fast, p.workdir, 7)
        assert "/dev/null" in (p.workdir / "manifest.txt").read_text()
        checked = cbackend.run(dgemm, p.size, fast, p.workdir, check_only=True)
        assert checked.returncode == 0 and (p.workdir / "out1_2.bin").exists(), checked.stderr
        whole = cbackend.run(dgemm, p.size, fast, p.workdir)
        assert whole.returncode != 0 and "cannot read an input file" in whole.stderr
        assert not (p.workdir / "out2_2.bin").exists()
    finally:
        p.backend.cleanup(p)


def test_a_check_only_run_still_refuses_a_wrong_answer(dgemm, fast):
    from perfgym.outcome import CHECK_ONLY
    _, o = run(dgemm, kernel(bias="+ 1e-3"), fast.replace(extra={CHECK_ONLY: True}))
    assert o.status is Status.WRONG_ANSWER and CHECK_ONLY not in o.flags
