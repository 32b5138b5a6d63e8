"""Sizes are bounded by the task: the C type of the entry's size parameters and the memory one
evaluation needs (every copy of every array), against the memory this machine has available."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfgym.tasks import SizeError, TaskError, get_task, load_task, parse_size
from perfgym.tasks import spec

# A task of one in-place array (the copies an in-place array costs) with a `long` size, so a
# size far beyond 2**63 bytes of data is representable.
SCAN_TOML = """
name = "scan"
entry = "void scan(double *x, long n)"
flops = "n"
bytes = "16*n"
reference = "np.cumsum(x)"
baseline = "naive.c"
[arrays.x]
shape = ["n"]
role = "inout"
[sizes]
default = { n = 1000 }
"""
SCAN_NAIVE = """void scan(double *x, long n) {
    for (long i = 1; i < n; i++) x[i] += x[i - 1];
}"""


def scan_task(tmp_path: Path):
    d = tmp_path / "scan"
    d.mkdir(exist_ok=True)
    (d / "task.toml").write_text(SCAN_TOML)
    (d / "naive.c").write_text(SCAN_NAIVE)
    return load_task(d)


def meminfo_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable")


def test_available_memory_is_at_most_what_the_kernel_reports():
    available = spec.available_memory()
    assert available is not None and 0 < available <= meminfo_available() * 1.05


def test_a_size_beyond_the_entry_type_names_the_parameter():
    dgemm = get_task("dgemm")
    with pytest.raises(SizeError, match=r"M=3000000000 does not fit the entry's `int M` "
                                        r"\(at most 2147483647\)"):
        parse_size("M=3000000000,N=1,K=1", dgemm)
    # the largest int passes that bound; the memory bound then refuses it with its numbers
    with pytest.raises(SizeError, match=r"needs [\d.]+ GiB of memory .* GiB available"):
        parse_size("M=2147483647,N=1000,K=1000", dgemm)


def test_memory_bound_says_which_bound_and_the_numbers(monkeypatch):
    dgemm = get_task("dgemm")
    size = {"M": 4096, "N": 4096, "K": 4096}  # 384 MiB of arrays
    needed = dgemm.memory_needed(size)
    assert needed > 10 * dgemm.total_bytes(size)
    monkeypatch.setattr(spec, "available_memory", lambda: int(needed / spec.MEMORY_SHARE) + 1)
    dgemm.check_size(size)  # just fits
    monkeypatch.setattr(spec, "available_memory", lambda: 2 << 30)
    with pytest.raises(SizeError) as caught:
        dgemm.check_size(size)
    message = str(caught.value)
    assert f"needs {needed / 2**30:.1f} GiB" in message and "2.0 GiB available" in message
    assert "the arrays are 384 MiB" in message and "choose a smaller size" in message
    assert isinstance(caught.value, TaskError)  # what the service maps to 400


def test_huge_shapes_do_not_wrap_around(tmp_path):
    task = scan_task(tmp_path)
    # 2**61 doubles are 2**64 bytes: np.prod in int64 would have wrapped this to 0
    assert task.total_bytes({"n": 2**61}) == 2**64
    with pytest.raises(SizeError, match="GiB available"):
        task.check_size({"n": 2**61})
    with pytest.raises(SizeError, match="at most 9223372036854775807"):
        task.check_size({"n": 2**63})


def test_non_integer_zero_and_negative_sizes_are_refused():
    dgemm = get_task("dgemm")
    for text, match in (("8.5", "whole numbers"), ("M=1e3,N=1,K=1", "whole numbers"),
                        ("0", "positive integer"), ("M=-1,N=2,K=2", "positive integer"),
                        ("M=2,M=3,N=2,K=2", "gives M twice"), ("M=2", "must give exactly")):
        with pytest.raises(SizeError, match=match):
            parse_size(text, dgemm)
    for bad in (8.5, True, "8", 0, -3):
        with pytest.raises(SizeError, match="positive integer"):
            dgemm.check_size({"M": bad, "N": 8, "K": 8})


def test_every_built_in_size_fits_this_machine():
    from perfgym.tasks import builtin_names
    for name in builtin_names():
        task = get_task(name)
        for size in task.sizes("all"):
            task.check_size(size)


# Runs one evaluation in a fresh interpreter and reports what it really used: the driver's growth
# (its peak RSS over its RSS before) and the harness's peak RSS, taken by /usr/bin/time around
# the harness command (a child's own rusage would count the driver's pages it was forked with).
MEASURE = r"""
import json, subprocess, sys
import perfgym.sandbox as sandbox
from perfgym import EvalConfig, evaluate, load_task, get_task
task = get_task(sys.argv[1]) if "/" not in sys.argv[1] else load_task(sys.argv[1])
size = json.loads(sys.argv[2])
config = EvalConfig(use_cache=False, compare_baseline=False, timeout=60.0, max_time=0.2,
                    max_samples=5, min_samples=3)
evaluate(task, task.baseline.read_text(), {k: 8 for k in size}, config)  # imports, probes
real_popen = subprocess.Popen
# the harness's peak RSS, from a parent that waits for it (as GNU time would, without it)
# (close_fds=False: the harness must inherit the pipe its word to go comes on)
PEAK = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[2:], close_fds=False); "
        "open(sys.argv[1], 'a').write("
        "str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\n'); "
        "sys.exit(r.returncode)")
class TimedHarness(real_popen):
    def __init__(self, argv, *args, **kwargs):
        if "manifest.txt" in argv:
            argv = [sys.executable, "-c", PEAK, sys.argv[3], *argv]
        super().__init__(argv, *args, **kwargs)
sandbox.subprocess.Popen = TimedHarness
def high_water():
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
                if line.startswith("VmHWM:"))
# the peak so far (the warm-up may have probed the machine with a large buffer) is not this
# evaluation's: start the high-water mark afresh (Linux: "5" resets VmHWM). A timing verdict
# of a busy machine (the parent's clock read late) is no news about memory: run it again.
for attempt in range(3):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = int(open("/proc/self/statm").read().split()[1]) * 4096
    outcome = evaluate(task, task.baseline.read_text(), size, config)
    driver = high_water() - before
    if outcome.status.value == "OK":
        break
    print("attempt", attempt + 1, outcome.status.value, outcome.message, file=sys.stderr)
harness = max(int(x) for x in open(sys.argv[3]).read().split()) * 1024
print(json.dumps({"status": outcome.status.value, "message": outcome.message,
                  "driver": driver, "harness": harness}))
"""


@pytest.mark.parametrize("which, size", [("transpose", {"N": 2048, "M": 2048}),
                                         ("dgemv", {"M": 4096, "N": 2048}),
                                         ("scan", {"n": 4 << 20})])
def test_the_bound_holds_for_a_real_evaluation(tmp_path, which, size):
    task = scan_task(tmp_path) if which == "scan" else get_task(which)
    target = str(task.directory) if which == "scan" else which
    r = subprocess.run([sys.executable, "-c", MEASURE, target, json.dumps(size),
                        str(tmp_path / "harness_rss")], capture_output=True, text=True,
                       timeout=300, env={**os.environ})
    assert r.returncode == 0, r.stderr[-3000:]
    used = json.loads(r.stdout.strip().splitlines()[-1])
    assert used["status"] == "OK", used["message"]
    needed = task.memory_needed(size)
    arrays = task.total_bytes(size)
    # the harness alone holds several copies: the measurement saw the arrays
    assert used["harness"] > 3 * arrays
    assert used["driver"] + used["harness"] <= needed
    assert needed <= 3 * (used["driver"] + used["harness"])  # an upper bound, not a wild one


def test_cli_refuses_an_absurd_size_up_front():
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", "--task", "dgemm",
                        "--size", "M=200000,N=200000,K=1"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "GiB of memory" in r.stderr and "GiB available" in r.stderr
    assert time.monotonic() - started < 30  # nothing was allocated


def test_service_answers_400_without_growing(tmp_path):
    pytest.importorskip("fastapi", reason="the serve extra is not installed: "
                                           "pip install 'perfgym[serve]'")
    from perfgym.client import RewardServiceError
    from service import running_service
    with running_service("--no-auth", timeout=60) as (proc, _, client):
        rss = _rss(proc.pid)
        naive = get_task("dgemm").baseline.read_text()
        for size in ("M=3000000000,N=1,K=1", "M=2000000000,N=2000,K=2"):
            with pytest.raises(RewardServiceError) as caught:
                client.evaluate([{"task": "dgemm", "code": naive, "size": size}])
            assert "400" in str(caught.value) and "size" in str(caught.value)
        assert _rss(proc.pid) < rss + (64 << 20)
        # and the same client goes on being served
        assert client.evaluate([{"task": "dgemm", "code": naive, "size": "16"}])[0][
            "outcome"]["status"] == "OK"


def _rss(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * 4096
