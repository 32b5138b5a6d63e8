"""What group timing costs a GRPO group, with and without a check call in each round.

    python benchmarks/group_timing_cost.py [--task dot] [--members 4] [--repeats 3] [--json [OUT]]

A group of `--members` correct answers (the task's naive kernel, each written a little
differently so that none is a copy of another) is timed against the baseline in group timing's
interleaved rounds (perfgym.group_timing.retime_group), two ways per repeat, alternating:
  check    each round's run of a kernel starts with a check call (one call, verified), then
           the timed run: how an evaluation runs a kernel (the default)
  no_check the timed run alone, which verifies that call's outputs again
Prints the seconds per group each way, the ratio, and the speedups each way found.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from results_by_machine import json_flag, record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="dot")
    ap.add_argument("--members", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    json_flag(ap, "group_timing_cost")
    args = ap.parse_args()
    from perfgym import EvalConfig, get_task, group_timing
    from perfgym.executors import Request, evaluate_many
    from perfgym.machine import cpu_model
    task = get_task(args.task)
    naive = task.baseline.read_text()
    texts = [f"/* member {k} */\n" + naive for k in range(args.members)]
    config = EvalConfig(use_cache=False)
    alone = evaluate_many([Request(task, t, None, config) for t in texts])
    if not all(o.ok for o in alone):
        raise SystemExit(f"a member failed alone: {[o.message for o in alone if not o.ok]}")
    seconds = {"check": [], "no_check": []}
    speedups = {"check": [], "no_check": []}
    for r in range(args.repeats):
        for way in (("check", "no_check") if r % 2 == 0 else ("no_check", "check")):
            group_timing.CHECK_CALL_IN_ROUNDS = way == "check"
            t0 = time.monotonic()
            judged = group_timing.retime_group(task, texts, alone, config)
            seconds[way].append(time.monotonic() - t0)
            speedups[way].append([round(o.speedup, 3) for o in judged])
            print(f"repeat {r + 1} {way:8s} {seconds[way][-1]:.1f} s", flush=True)
    group_timing.CHECK_CALL_IN_ROUNDS = True
    median = {k: statistics.median(v) for k, v in seconds.items()}
    result = {"machine": cpu_model(), "task": args.task, "members": args.members,
              "rounds": group_timing.ROUNDS, "repeats": args.repeats,
              "seconds_per_group": median, "all_seconds": seconds, "speedups": speedups,
              "ratio_no_check_over_check": median["no_check"] / median["check"]}
    print(json.dumps(result, indent=1))
    if args.json:
        record("group_timing_cost", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    per = result["seconds_per_group"]
    return {f"s a group of {result['members']} ({result['task']}), with / without the check call":
            f"{per['check']:.1f} / {per['no_check']:.1f}",
            "without / with": f"{result['ratio_no_check_over_check']:.2f}x"}


if __name__ == "__main__":
    main()
