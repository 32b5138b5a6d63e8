"""Does each task's own naive kernel finish within a timeout, at every train size?

    python benchmarks/naive_within_timeout.py [--timeouts 3,8] [--max-time 0.5] [--json [OUT]]

A measure that stops every kernel after T seconds (the learning-speed experiment's
MEASURE_OVERRIDES: 3 s, timing for 0.5 s) must leave room for a kernel at the naive kernel's
speed: else every answer of that task fails by TIMEOUT, however right and fast. For each
built-in CPU task and train size, the naive kernel is judged once per timeout (no cache) and
its status and wall seconds (the whole evaluation, the compile included) printed; then the
tasks whose naive kernel did not finish within the smallest timeout. One evaluation at a time:
give the machine to this script alone.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from results_by_machine import json_flag, record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeouts", default="3,8")
    ap.add_argument("--max-time", type=float, default=0.5)
    ap.add_argument("--tasks", default=None, help="comma-separated (default: every CPU task)")
    json_flag(ap, "naive_within_timeout")
    args = ap.parse_args()
    from perfgym.config import EvalConfig
    from perfgym.evaluate import evaluate
    from perfgym.tasks import builtin_names, format_size, get_task
    timeouts = [float(t) for t in args.timeouts.split(",")]
    names = args.tasks.split(",") if args.tasks else [
        n for n in builtin_names() if get_task(n).language in ("c", "cpp")]
    rows = []
    for name in names:
        task = get_task(name)
        naive = Path(task.baseline).read_text()
        for size in task.train_sizes or [task.default_size]:
            for timeout in timeouts:
                o = evaluate(task, naive, size, EvalConfig(timeout=timeout,
                                                           max_time=args.max_time,
                                                           use_cache=False))
                row = {"task": name, "size": format_size(size), "timeout": timeout,
                       "status": o.status.value, "seconds": round(o.elapsed, 2)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    smallest = min(timeouts)
    short = sorted({r["task"] for r in rows if r["timeout"] == smallest and r["status"] != "OK"})
    print(f"\nnaive kernel not OK within {smallest:g} s: {', '.join(short) or 'none'}")
    if args.json:
        record("naive_within_timeout", {"max_time": args.max_time, "rows": rows},
               {f"not OK within {smallest:g} s": ", ".join(short) or "none"}, args.json)


if __name__ == "__main__":
    main()
