"""How fast and how steady is the evaluator? All figures from one run on this machine.

    python benchmarks/eval_throughput.py [--candidates 16] [--repeats 10] [--json [OUT]]

Prints:
  * distinct dgemm-256 candidates evaluated per minute (cache off, builds in parallel, timing
    in the exclusive lane), with the default timing policy, and the share of that batch's
    wall time in which the timing lane was idle (no kernel being timed);
  * perfgym's wall time per candidate over the floor: plain `gcc` of the same file with a bare
    driver that calls the kernel as many times as perfgym did, plus running it once;
  * the CV of the median kernel time over repeated evaluations of one kernel;
  * what a wrong-answer candidate costs next to a correct one, with the check before timing (one
    verified call before the timing loop) and without it.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from perfgym import EvalConfig, evaluate, get_task
from results_by_machine import json_flag, record
from perfgym.executors import Request, evaluate_many
from perfgym.lane import LANE

FLOOR_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K);
int main(int argc, char **argv) {
    int n = atoi(argv[1]), calls = atoi(argv[2]);
    double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n),
           *C = malloc(sizeof(double) * n * n);
    for (int i = 0; i < n * n; i++) { A[i] = rand() / (double)RAND_MAX; B[i] = A[i] - 0.5; }
    for (int c = 0; c < calls; c++) matmul_optimized(A, B, C, n, n, n);
    printf("%g\n", C[n * n - 1]);
    return 0;
}
"""


def variants(code: str, count: int) -> list[str]:
    """Distinct candidates: the same kernel with a different constant folded in."""
    return [code.replace("void matmul_optimized(",
                         f"static const int variant_{i} = {i};\nvoid matmul_optimized(", 1)
            for i in range(count)]


def floor_seconds(code: str, n: int, calls: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "kernel.c").write_text(code)
        Path(tmp, "driver.c").write_text(FLOOR_DRIVER)
        start = time.perf_counter()
        subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", "kernel.c", "driver.c",
                        "-o", "floor"], cwd=tmp, check=True)
        subprocess.run(["./floor", str(n), str(calls)], cwd=tmp, check=True,
                       capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=10)
    json_flag(ap, "eval_throughput")
    args = ap.parse_args()

    task = get_task("dgemm")
    cfg = EvalConfig(use_cache=False)
    n = task.default_size["M"]
    naive, expert = task.baseline.read_text(), task.expert.read_text()
    evaluate(task, naive, None, cfg.replace(use_cache=True))  # baseline + machine, once

    # 1. throughput over distinct candidates (half naive, half expert), and how much of the
    # batch the timing lane was idle (no kernel being timed: builds and checks only)
    texts = variants(naive, args.candidates // 2) + variants(expert, args.candidates -
                                                             args.candidates // 2)
    held = LANE.exclusive_seconds
    start = time.perf_counter()
    outs = evaluate_many([Request(task, t, None, cfg) for t in texts])
    batch = time.perf_counter() - start
    lane_idle = 1 - (LANE.exclusive_seconds - held) / batch
    assert all(o.ok for o in outs), [o.message for o in outs if not o.ok]
    per_minute = len(texts) / batch * 60

    # 2. overhead over the floor, one candidate at a time
    ratios = {}
    for name, code in (("naive", naive), ("expert", expert)):
        walls, floors = [], []
        for i, text in enumerate(variants(code, 3)):
            t0 = time.perf_counter()
            o = evaluate(task, text, None, cfg)
            walls.append(time.perf_counter() - t0)
            calls = 3 + o.timing.warmups + len(o.timing.samples)  # + check, set 2
            floors.append(floor_seconds(text, n, calls))
        ratios[name] = {"perfgym_s": statistics.median(walls),
                        "floor_s": statistics.median(floors),
                        "ratio": statistics.median(walls) / statistics.median(floors)}

    # 3. repeatability of the reported median
    cvs = {}
    for name, code in (("naive", naive), ("expert", expert)):
        medians = [evaluate(task, code, None, cfg).timing.median for _ in range(args.repeats)]
        cvs[name] = statistics.stdev(medians) / statistics.mean(medians)

    # 4. a wrong answer's cost, with and without the check before timing
    wrong = naive.replace("C[i * N + j] = sum;", "C[i * N + j] = sum + 1e-3;")
    assert wrong != naive, "the naive kernel changed: update the wrong-answer edit"
    costs = {}
    for check_first in (False, True):
        c = cfg.replace(extra={"check_first": check_first})
        for name, code in (("correct", naive), ("wrong", wrong)):
            walls = []
            for text in variants(code, 3):
                t0 = time.perf_counter()
                o = evaluate(task, text, None, c)
                walls.append(time.perf_counter() - t0)
                assert o.ok == (name == "correct"), o.message
            costs[f"{name}, check {'on' if check_first else 'off'}"] = statistics.median(walls)

    result = {"candidates": len(texts), "batch_seconds": batch, "candidates_per_minute": per_minute,
              "lane_idle_share": lane_idle,
              "overhead": ratios, "repeat_cv": cvs, "repeats": args.repeats,
              "seconds_per_candidate": costs}
    if args.json:
        record("eval_throughput", result, summary(result), args.json)
    print(f"throughput: {per_minute:.1f} distinct dgemm-256 candidates/minute "
          f"({len(texts)} in {batch:.1f} s, cache off; the timing lane idle "
          f"{lane_idle:.0%} of it)")
    for name, r in ratios.items():
        print(f"overhead ({name}): perfgym {r['perfgym_s']:.3f} s vs floor {r['floor_s']:.3f} s "
              f"per candidate -> ratio {r['ratio']:.2f}")
    for name, cv in cvs.items():
        print(f"repeatability ({name}): CV of the median over {args.repeats} evaluations "
              f"{cv * 100:.2f}%")
    for name, seconds in costs.items():
        print(f"cost per candidate ({name}): {seconds:.3f} s")
    for when in ("off", "on"):
        print(f"wrong / correct with the check {when}: "
              f"{costs[f'wrong, check {when}'] / costs[f'correct, check {when}']:.2f}")


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    cost = result["seconds_per_candidate"]
    return {"candidates a minute": f"{result['candidates_per_minute']:.1f}",
            "over the floor, naive / expert": " / ".join(
                f"{result['overhead'][k]['ratio']:.2f}x" for k in ("naive", "expert")),
            "CV of the median, naive / expert": " / ".join(
                f"{result['repeat_cv'][k]:.2%}" for k in ("naive", "expert")),
            "wrong / correct, check on":
                f"{cost['wrong, check on'] / cost['correct, check on']:.2f}"}


if __name__ == "__main__":
    main()
