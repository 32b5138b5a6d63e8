"""The machine probe runs once per machine and cache, however many callers ask at once.

verl's reward loop scores 16 samples from 16 threads; on a fresh node each one ran the probe
(311 s, and every probe disturbed by the others). Here the probe body is a stand-in that counts
its runs and takes a while: threads, then processes, call machine_info on an empty cache."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from perfgym import machine

FAKE = """
import time
from perfgym import machine

def fake_measure(compiler="gcc", previous=None):
    with open(COUNT, "a") as f:
        f.write("probe\\n")
    time.sleep(0.4)  # long enough for every other caller to arrive while it runs
    fp = machine.fingerprint(compiler)
    return {"fingerprint": fp, "peak_gflops": 10.0, "peak_gflops_fp32": 20.0,
            "bandwidth_gbs": 5.0, "bandwidth_curve": [[1000, 9.0]], "blas_dgemm_gflops": 8.0,
            "freq_ghz": 2.0, "rated_ghz": 2.0, "isa_bound_gflops": 100.0,
            "isa_bound_gflops_fp32": 200.0,
            "probe": {"attempts": [], "consistent": True}, "measured_at": str(time.time())}
"""


def _fake(count_file):
    scope = {"COUNT": str(count_file)}
    exec(FAKE, scope)
    return scope["fake_measure"]


def test_threads_on_an_empty_cache_run_the_probe_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFGYM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(machine, "_loaded", {})
    count = tmp_path / "count"
    monkeypatch.setattr(machine, "measure", _fake(count))
    results, errors = [], []

    def call():
        try:
            results.append(machine.machine_info())
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert count.read_text().count("probe") == 1
    assert len(results) == 12 and all(r["measured_at"] == results[0]["measured_at"]
                                      for r in results)


CALLER = FAKE + """
import sys, threading
machine.measure = fake_measure
go = float(sys.argv[1])
time.sleep(max(0.0, go - time.time()))  # every process asks at the same moment
out = []
ts = [threading.Thread(target=lambda: out.append(machine.machine_info()["measured_at"]))
      for _ in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print(" ".join(out))
"""


def test_processes_on_an_empty_cache_run_the_probe_once(tmp_path):
    count = tmp_path / "count"
    env = dict(os.environ, PERFGYM_CACHE_DIR=str(tmp_path / "cache"))
    go = time.time() + 3.0  # after every interpreter has imported perfgym
    procs = [subprocess.Popen([sys.executable, "-c", f"COUNT = {str(count)!r}\n" + CALLER,
                               str(go)], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert count.read_text().count("probe") == 1
    seen = {stamp for out in outs for stamp in out}
    assert len(seen) == 1 and sum(map(len, outs)) == 12  # every caller read the one result
