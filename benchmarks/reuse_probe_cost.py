"""What the reuse probes cost an evaluation, and what they do to its figure.

    python benchmarks/reuse_probe_cost.py [--tasks dgemm,sgemm,pdist,conv2d,trsm,jacobi2d]
        [--repeats 2] [--json [OUT]]

On tasks whose calls do many flops per input element (perfgym.backends.c.build.fresh_inputs)
two secret timed calls get every input element drawn anew and their answers are checked
(measure.reuse_problem; a kernel that corrects its last answer for the one changed element
was right every call and 31x naive on dgemm: tests/hostile/test_reuse.py). Each task's naive
and expert kernels are evaluated at every train size two ways per repeat, alternating which
goes first:
  probes  as the evaluator runs now
  none    fresh_inputs off: one element changed before each call, as before
Prints, per task and kernel, the wall seconds of the evaluations each way and the median call
time each way (the ratios probes / none are the price, wall, and the change in the figure,
median call), and the largest probe ratio of its evaluations: the smaller of its two probes'
times over the calls around them (measure.probe_times), on the times the check judges (each
call's charged time, the larger of the harness's and the parent's, in an undisturbed run),
which flags reuse above measure.REUSE_FACTOR. An honest kernel's is the margin that factor
leaves.
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics

from check_cost import two_ways
from results_by_machine import json_flag, record

TASKS = "dgemm,sgemm,pdist,conv2d,trsm,jacobi2d"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=TASKS)
    ap.add_argument("--repeats", type=int, default=2)
    json_flag(ap, "reuse_probe_cost")
    args = ap.parse_args()
    from perfgym import EvalConfig, get_task
    from perfgym.backends.c import build
    from perfgym.machine import cpu_model
    # (the package's `measure` is the function of that name; this is its module)
    measure = importlib.import_module("perfgym.backends.c.measure")
    fresh_rule = build.fresh_inputs
    judged = measure.reuse_problem
    probe_ratios: list[float] = []  # each evaluation's flagged statistic

    def spy(samples, probes):
        if times := measure.probe_times(samples, probes):
            probe_ratios.append(min(took / near for took, near in times))
        return judged(samples, probes)
    measure.reuse_problem = spy
    config = EvalConfig(use_cache=False, compare_baseline=False)

    def switch(on: bool) -> None:
        build.fresh_inputs = fresh_rule if on else (lambda task, size: False)
    rows = []
    for name in args.tasks.split(","):
        task = get_task(name)
        for kernel, path in (("naive", task.baseline), ("expert", task.expert)):
            if path is None:
                continue
            probe_ratios.clear()
            fresh_sizes = sum(fresh_rule(task, s) for s in task.sizes("train"))
            row = {"task": name, "kernel": kernel, "fresh_sizes": fresh_sizes,
                   **two_ways(task, kernel, path.read_text(), args.repeats, switch, "probes",
                              config),
                   "probe_ratio_max": max(probe_ratios, default=None)}
            rows.append(row)
            print(f"{name:9s} {kernel:6s} probes at {fresh_sizes}/{len(task.sizes('train'))} "
                  f"sizes: wall {row['wall_s']['probes']:.1f} / {row['wall_s']['none']:.1f} s "
                  f"({row['wall_ratio']:.2f}x), median call {row['median_ratio']:.3f}x, "
                  f"probe ratio at most {row['probe_ratio_max'] or 0:.2f}", flush=True)
    result = {"machine": cpu_model(), "repeats": args.repeats, "rows": rows,
              "wall_ratio_geomean": statistics.geometric_mean([r["wall_ratio"] for r in rows]),
              "median_ratio_geomean": statistics.geometric_mean(
                  [r["median_ratio"] for r in rows]),
              "probe_ratio_max": max((r["probe_ratio_max"] for r in rows
                                      if r["probe_ratio_max"] is not None), default=None)}
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    if args.json:
        record("reuse_probe_cost", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    return {"evaluation wall, probes / none (geomean)":
            f"{result['wall_ratio_geomean']:.2f}x",
            "median call, probes / none (geomean)":
            f"{result['median_ratio_geomean']:.3f}x",
            "largest probe ratio of an honest kernel": f"{result['probe_ratio_max']:.2f}"}


if __name__ == "__main__":
    main()
