"""Where a fresh node's first rewards go: the machine probe (each of its runs), the harness's
compile and the naive kernel's timing, against the same calls on the cache they left.

    python benchmarks/fresh_node_cost.py [--runs 3] [--in-flight 16] [--json OUT]

Each run is a new process on a new empty cache (PERFGYM_CACHE_DIR): --in-flight concurrent
verl reward calls (threads, as verl's reward loop makes them), then as many again with new
answers (warm). Reported: both waves' seconds and their ratio (the RL issue asks for <= 2x),
and the fresh wave's parts summed over its threads, with how many times each ran (a naive
kernel timed 16 times is 16 threads that each missed the cache). Medians over --runs. The
answers and label are rl_load.py's (dot, N=200000, the four-accumulator answer made new each
time). Run it alone on the machine: every part is a timing.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def fail(message: str) -> None:
    """Bad input: one line, exit status 2."""
    print(message, file=sys.stderr)
    sys.exit(2)


def timed(owner, name: str, parts: dict, counts: dict, label) -> None:
    """Wrap owner.name so each call adds its seconds to parts[label(args)] and 1 to counts."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            key = label(*args, **kwargs)
            parts[key] += time.perf_counter() - started
            counts[key] += 1

    setattr(owner, name, wrapper)


def one_process(in_flight: int) -> dict:
    """In a process on an empty cache: `in_flight` concurrent reward calls (verl's reward loop
    sends them from threads), split into their parts, then as many again with new answers."""
    started = time.perf_counter()
    import importlib
    evaluate = importlib.import_module("perfgym.evaluate")  # (the package exports a function)
    from perfgym import machine
    from perfgym.backends.c import build
    from perfgym.integrations.verl import compute_score
    from rl_load import LABEL, rollouts
    imported = time.perf_counter() - started
    parts: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    timed(machine, "measure", parts, counts, lambda *a, **k: "probe")
    timed(machine._Probe, "__init__", parts, counts, lambda *a, **k: "probe: compile")
    timed(machine._Probe, "run", parts, counts,
          lambda self, *a, fp32=False: "probe: " + " ".join(a[:2]) + (" fp32" if fp32 else ""))
    timed(build, "harness_objects", parts, counts, lambda *a, **k: "harness objects")
    timed(evaluate, "baseline", parts, counts, lambda *a, **k: "naive kernel")

    def wave() -> float:
        answers = [a for a in rollouts(2 * in_flight, cached=False)[1::2]]  # the fast kind
        t0 = time.perf_counter()
        with ThreadPoolExecutor(in_flight) as pool:
            list(pool.map(lambda text: compute_score("perfgym/dot", text, LABEL), answers))
        return time.perf_counter() - t0

    fresh = wave()
    first = {"parts": dict(parts), "counts": dict(counts)}
    return {"import_s": imported, "fresh_s": fresh, "warm_s": wave(), **first}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes (default 3)")
    ap.add_argument("--in-flight", type=int, default=16, help="concurrent calls (default 16)")
    ap.add_argument("--json", type=Path, help="write the result here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.runs < 1 or args.in_flight < 1:
        fail("--runs and --in-flight must be at least 1")
    if args.child:
        print(json.dumps(one_process(args.in_flight)))
        return
    runs = []
    for i in range(args.runs):
        cache = tempfile.mkdtemp(prefix="perfgym-fresh-cost-")
        try:
            done = subprocess.run([sys.executable, __file__, "--child", "--in-flight",
                                   str(args.in_flight)], capture_output=True, text=True,
                                  env={**os.environ, "PERFGYM_CACHE_DIR": cache}, timeout=900)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        if done.returncode != 0:
            raise SystemExit(f"the fresh process failed: {done.stderr.strip()[-500:]}")
        runs.append(json.loads(done.stdout.splitlines()[-1]))
        print(f"[{i + 1}/{args.runs}] {args.in_flight} calls fresh {runs[-1]['fresh_s']:.2f} s, "
              f"warm {runs[-1]['warm_s']:.2f} s", file=sys.stderr)
    names = sorted({k for r in runs for k in r["parts"]})
    median = {k: round(statistics.median(r["parts"].get(k, 0.0) for r in runs), 3)
              for k in names}
    count = {k: max(r["counts"].get(k, 0) for r in runs) for k in names}
    fresh = statistics.median(r["fresh_s"] for r in runs)
    warm = statistics.median(r["warm_s"] for r in runs)
    from results_by_machine import commit, machine
    result = {"benchmark": "fresh_node_cost", "runs": len(runs), "in_flight": args.in_flight,
              "machine": machine(),
              "commit": commit(), "date": time.strftime("%Y-%m-%d"),
              "fresh_s": round(fresh, 3), "warm_s": round(warm, 3),
              "fresh_over_warm": round(fresh / warm, 2),
              "parts_median_s": median, "parts_calls": count, "per_run": runs}
    width = max(map(len, names)) + 2
    print("seconds summed over the calls' threads (a part several threads wait on counts each)")
    for k in names:
        print(f"{k:<{width}} {median[k]:7.3f} s  ({count[k]} calls)")
    print(f"{args.in_flight} calls: fresh {fresh:.2f} s, warm {warm:.2f} s, "
          f"{fresh / warm:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
