"""What group timing's first pass costs an answer: judged up to its check call (CHECK_ONLY).

    python benchmarks/first_pass_cost.py [--tasks dot,transpose,prefix_sum] [--answers 8]
                                         [--json OUT]

GRPO's reward with group timing judges every answer of a step this way before the rounds
(perfgym.group_timing.judge_in_groups). Per task, `--answers` copies of the naive kernel (each
written a little differently, so none is a cached copy of another) are judged one after
another with CHECK_ONLY; prints the median seconds an answer takes, from the call to its
Outcome. To compare two versions of perfgym, run it under each (PYTHONPATH=<checkout>/src).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="dot,transpose,prefix_sum")
    ap.add_argument("--answers", type=int, default=8)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import perfgym
    from perfgym import EvalConfig, evaluate, get_task
    from perfgym.group_timing import check_only
    from perfgym.machine import cpu_model
    config = check_only(EvalConfig(use_cache=False))
    rows = {}
    for name in args.tasks.split(","):
        task = get_task(name)
        naive = task.baseline.read_text()
        evaluate(task, "/* warm-up */\n" + naive, None, config)  # the harness built once
        seconds = []
        for k in range(args.answers):
            t0 = time.monotonic()
            o = evaluate(task, f"/* answer {k} */\n" + naive, None, config)
            seconds.append(time.monotonic() - t0)
            if not o.ok:
                raise SystemExit(f"{name}: the naive kernel failed its check: {o.message}")
        rows[name] = {"median_seconds": statistics.median(seconds), "seconds": seconds}
        print(f"{name:12s} {rows[name]['median_seconds']:.3f} s an answer", flush=True)
    result = {"machine": cpu_model(), "perfgym": str(Path(perfgym.__file__).parent),
              "answers": args.answers, "tasks": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
