"""A starved parent never sees tampering: the honest naive scan, evaluated at nice 19 beside
a CPU and memory hog at normal priority (a trainer beside its evaluator), is OK, maybe marked
disturbed (a timing the reward refuses and the cache does not keep: retryable), in every one of
20 evaluations, never WRONG_ANSWER "tampering". Before the CPU witness, 1 of 6 such
evaluations beside a 2-core training was "tampering: the harness reported 4.04 ms per call but
the parent saw 9.94 ms". The hostile side (work hidden between the calls is still tampering)
is tests/hostile/test_timer_cross_check.py."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

RUNS = int(os.environ.get("PERFGYM_STARVED_RUNS", 20))

HOG = textwrap.dedent("""
    import ctypes, multiprocessing as mp, os, sys, time
    def busy(end):
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: ends with the hog's parent
        while time.monotonic() < end:  # a trainer's bursts: 8 ms of CPU, 4 ms of waiting
            burst = time.monotonic() + 0.008
            while time.monotonic() < burst:
                pass
            time.sleep(0.004)
    if __name__ == "__main__":
        end = time.monotonic() + float(sys.argv[1])
        ps = [mp.Process(target=busy, args=(end,)) for _ in os.sched_getaffinity(0)]
        for p in ps:
            p.start()
        for p in ps:
            p.join()
""")

EVALUATIONS = textwrap.dedent(f"""
    import json
    from perfgym import EvalConfig, evaluate, get_task
    task = get_task("prefix_sum")
    config = EvalConfig(use_cache=False, compare_baseline=False, max_time=0.3, max_samples=40)
    for _ in range({RUNS}):
        o = evaluate(task, task.baseline.read_text(), None, config)
        seen = o.parent_check or {{}}
        print(json.dumps({{"status": o.status.value, "message": o.message,
                          "disturbed": o.disturbed, "late": seen.get("parent_late"),
                          "reported": seen.get("reported_median"),
                          "parent": seen.get("parent_median"),
                          "witness": {{k: seen.get(k) for k in ("own_cpu", "harness_cpu",
                                      "harness_cpu_allowed")}}}}), flush=True)
""")


@pytest.mark.slow
# On a 2-core AMD EPYC, 400 of 400 OK with PERFGYM_STARVED_RUNS=200 (twice); before the CPU
# witness judged all the calls together and the bunched-read fixes (issue 36), 35 of 40. Then
# one CI run of 20 had a "tampering" ("@t 0" stamped late: the marker floors' fix, in
# cross_check); after it, 200 of 200 on the same kind.
def test_an_honest_scan_beside_a_cpu_hog_is_never_tampering():
    # In this session: with autogroup scheduling (Linux's default for desktops and many
    # servers) CPU time is shared between sessions first, so only a hog in the evaluator's own
    # session has priority over it; the harness runs in a session of its own (the sandbox's).
    hog = subprocess.Popen([sys.executable, "-c", HOG, "1800"])
    try:
        time.sleep(1)
        # without CAP_SYS_NICE the parent's marker reader cannot take real-time priority
        # (sandbox._time_markers_promptly), as where perfgym does not run as root: it waits
        # for a CPU behind the hog like the rest of the evaluator
        r = subprocess.run(["setpriv", "--bounding-set=-sys_nice", "--", "nice", "-n", "19",
                            sys.executable, "-c", EVALUATIONS],
                           capture_output=True, text=True, timeout=1800)
    finally:
        hog.kill()  # (its processes end with it: PR_SET_PDEATHSIG)
        hog.wait()
    assert r.returncode == 0, r.stderr[-3000:]
    outcomes = [json.loads(line) for line in r.stdout.splitlines()]
    print("\n".join(json.dumps(o) for o in outcomes))  # (with -s: the figures of each run)
    assert len(outcomes) == RUNS
    assert [o for o in outcomes if o["status"] != "OK"] == []
