"""The reward service's overhead per candidate against calling the evaluator directly.

    python benchmarks/serve_overhead.py [--candidates 16] [--json [OUT]]

Starts `perfgym serve` on a free local port, scores the same batch of distinct dgemm-256
candidates (cache off) directly through evaluate_many and through POST /evaluate, and prints
both per-candidate times and their difference, measured in one run.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

from perfgym import EvalConfig, get_task
from perfgym.client import RewardClient, RewardServiceError
from perfgym.executors import Request, evaluate_many
from results_by_machine import json_flag, record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=16)
    json_flag(ap, "serve_overhead")
    args = ap.parse_args()
    task = get_task("dgemm")
    naive = task.baseline.read_text()
    texts = [naive.replace("void matmul_optimized(", f"static const int v{i} = {i};\n"
                           "void matmul_optimized(", 1) for i in range(args.candidates)]
    evaluate_many([Request(task, naive, None, EvalConfig())])  # baseline and machine, once

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "perfgym.cli", "serve", "--port",
                               str(port)], env={**os.environ, "PERFGYM_TOKEN": "bench"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = RewardClient(f"http://127.0.0.1:{port}", "bench", timeout=600)
    try:
        for _ in range(300):
            try:
                client.health()
                break
            except RewardServiceError:
                time.sleep(0.05)
        # one request first, so neither side pays its process's one-time start-up in the figures
        client.evaluate([{"task": "dgemm", "code": naive}])
        t0 = time.perf_counter()
        # the same fixed work on both sides: 5 timed calls, whatever the noise says
        fixed = EvalConfig(use_cache=False, min_samples=5, max_samples=5)
        direct = evaluate_many([Request(task, t, None, fixed) for t in texts])
        t_direct = time.perf_counter() - t0
        t0 = time.perf_counter()
        served = client._call("POST", "/evaluate", {
            "candidates": [{"task": "dgemm", "code": t.replace("v", "w", 1)} for t in texts],
            "use_cache": False, "min_samples": 5, "max_samples": 5})["results"]
        t_served = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait()
    assert all(o.ok for o in direct) and all(r["outcome"]["status"] == "OK" for r in served)
    n = len(texts)
    print(f"{n} distinct dgemm-256 candidates, cache off")
    calls_direct = sum(len(o.timing.samples) + o.timing.warmups for o in direct) / n
    calls_served = sum(len(r["outcome"]["timing"]["samples"]) + r["outcome"]["timing"]["warmups"]
                       for r in served) / n
    print(f"  timed calls per candidate: direct {calls_direct:.1f}, served {calls_served:.1f} "
          "(fixed, so both do the same work)")
    print(f"  direct (evaluate_many):  {t_direct / n * 1e3:7.1f} ms per candidate")
    print(f"  through POST /evaluate:  {t_served / n * 1e3:7.1f} ms per candidate")
    print(f"  service overhead:        {(t_served - t_direct) / n * 1e3:7.1f} ms per candidate "
          f"(ratio {t_served / t_direct:.3f})")
    if args.json:
        result = {"candidates": n, "timed_calls_per_candidate": calls_direct,
                  "direct_s_per_candidate": t_direct / n, "served_s_per_candidate": t_served / n,
                  "ratio": t_served / t_direct}
        record("serve_overhead", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    direct, served = result["direct_s_per_candidate"], result["served_s_per_candidate"]
    return {"ms a candidate, direct / served": f"{direct * 1e3:.1f} / {served * 1e3:.1f}",
            "overhead a candidate": f"{(served - direct) * 1e3:.1f} ms ({result['ratio']:.3f}x)"}


if __name__ == "__main__":
    main()
