"""What the late checks cost an evaluation, and what they do to its figure.

    python benchmarks/late_check_cost.py [--tasks dgemm,dgemv,transpose,jacobi2d,histogram]
        [--repeats 2] [--json [OUT]]

Late timed calls' answers are checked besides the chosen call's, the probes' and the last's
(harness.c's late_keep: a uniform sample of build.LATE_K of the calls after the probes;
a kernel right only on the calls it can tell are checked was OK at about 3x naive:
tests/hostile/test_late_check.py). Their price: each answer kept (about K ln(calls / K) a run) is written to a file
between two calls, and the parent works out the K calls' inputs (replay.py) and checks them.
Each task's naive and expert kernels are evaluated at every train size two ways per repeat,
alternating which goes first:
  late  as the evaluator runs now (build.LATE_K, where build.late_checks says so)
  none  build.LATE_K = 0: no late call kept
Prints, per task and kernel, the wall seconds each way and the median call time each way (the
ratios late / none: the price, wall, and the change in the figure, median call).
"""
from __future__ import annotations

import argparse
import json
import statistics

from check_cost import two_ways
from results_by_machine import json_flag, record

TASKS = "dgemm,dgemv,transpose,jacobi2d,histogram"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=TASKS)
    ap.add_argument("--repeats", type=int, default=2)
    json_flag(ap, "late_check_cost")
    args = ap.parse_args()
    from perfgym import EvalConfig, get_task
    from perfgym.backends.c import build
    from perfgym.machine import cpu_model
    shipped = build.LATE_K
    config = EvalConfig(use_cache=False, compare_baseline=False)

    def switch(on: bool) -> None:
        build.LATE_K = shipped if on else 0
    rows = []
    for name in args.tasks.split(","):
        task = get_task(name)
        for kernel, path in (("naive", task.baseline), ("expert", task.expert)):
            if path is None:
                continue
            kept: list[int] = []  # late calls checked per evaluation (the "late" way)
            row = {"task": name, "kernel": kernel,
                   **two_ways(task, kernel, path.read_text(), args.repeats, switch, "late",
                              config, lambda o: kept.append(len(o.parent_check["late"]))),
                   "late_calls_mean": statistics.mean(kept)}
            rows.append(row)
            print(f"{name:9s} {kernel:6s} wall {row['wall_s']['late']:.1f} / "
                  f"{row['wall_s']['none']:.1f} s ({row['wall_ratio']:.2f}x), "
                  f"median call {row['median_ratio']:.3f}x, "
                  f"{row['late_calls_mean']:.1f} late calls checked", flush=True)
    result = {"machine": cpu_model(), "repeats": args.repeats, "late_k": shipped,
              "rows": rows,
              "wall_ratio_geomean": statistics.geometric_mean([r["wall_ratio"] for r in rows]),
              "median_ratio_geomean": statistics.geometric_mean(
                  [r["median_ratio"] for r in rows])}
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    if args.json:
        record("late_check_cost", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    return {"evaluation wall, late / none (geomean)": f"{result['wall_ratio_geomean']:.2f}x",
            "median call, late / none (geomean)": f"{result['median_ratio_geomean']:.3f}x"}


if __name__ == "__main__":
    main()
