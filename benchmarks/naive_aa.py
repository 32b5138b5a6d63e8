"""An A/A test of the learning experiment's measure: how often is the naive kernel itself
counted "faster"?

    python benchmarks/naive_aa.py [--tasks dgemm,...] [--repeats 10] [--json OUT]

Each training task's naive kernel with one statement added at the top of its body, `(void)K;`
with K different each time: the compiler emits the same code, but the copy check does not see
the naive kernel (it compares the code's shape), and the outcome cache does not see an answer
it judged before. Each is judged as the experiment judges a student's answer
(learning_speed.judge: folded over the task's train sizes, the measure's settings and
timeouts) and counted by its rule (learning_speed.is_faster: the fold >= 1.1 and the
evaluator's bound where it gives one). Every one of them is at naive speed by construction,
so the share counted faster is the measure's false-positive rate at naive speed: C kernels are
judged here without group timing's paired bound, so the speedup alone decides.

Run it alone on the machine: it is a timing. Prints a table per task and the overall share;
the JSON also has, per task and size, the copies' median times and the baseline times their
verdicts used (`per_size`), so a reader sees which of the two moved.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import learning_speed as ls  # noqa: E402


def fail(message: str) -> None:
    """Bad input: one line, exit status 2."""
    print(message, file=sys.stderr)
    sys.exit(2)


def same_code_variant(task_name: str, k: int) -> str:
    """The naive kernel with `(void)k;` first in its body: other text, the same machine code."""
    from perfgym.tasks import get_task
    task = get_task(task_name)
    code = Path(task.baseline).read_text()
    start = code.index("{", code.index(task.signature.name + "("))
    return code[:start + 1] + f" (void){k};" + code[start + 1:]


def per_size_seconds(answers, outcomes) -> dict[str, dict[str, dict]]:
    """task -> size -> the copies' median times (s) and the baselines they were compared with
    (speedup x time: the baseline each copy's verdict used), to see which of the two moved, and
    the processes each copy was timed in (more than one where its baseline's disagreed)."""
    out: dict[str, dict[str, dict]] = {}
    for (task, _), o in zip(answers, outcomes):
        for part in o.per_size or []:
            timing = part.get("timing") or {}
            if part.get("status") != "OK" or not timing.get("median") or not part.get("speedup"):
                continue
            size = ",".join(f"{k}={v}" for k, v in part["sizes"].items())
            cell = out.setdefault(task, {}).setdefault(
                size, {"copies": [], "baselines": [], "processes": []})
            cell["copies"].append(timing["median"])
            cell["processes"].append(len(timing.get("process_medians") or [0]))
            cell["baselines"].append(timing["median"] * part["speedup"])
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default=",".join(ls.TRAIN_TASKS))
    ap.add_argument("--repeats", type=int, default=10, help="variants judged per task")
    ap.add_argument("--json", type=Path, help="write the result here")
    args = ap.parse_args(argv)
    from perfgym.tasks import get_task
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    try:
        for t in tasks:
            get_task(t)
    except (KeyError, ValueError) as exc:
        fail(f"--tasks: {exc}")
    if args.repeats < 1:
        fail("--repeats is at least 1")
    stamp = int(time.time())  # new answers each run: none is served from the outcome cache
    answers = []
    for t in tasks:
        for i in range(args.repeats):
            code = same_code_variant(t, stamp * 1000 + i)
            if ls.naive_copy(t, code):
                fail(f"{t}: the variant reads as a copy of the naive kernel; the A/A test "
                         "needs one that does not")
            answers.append((t, f"```c\n{code}\n```"))
    timeouts = ls.naive_timeouts(tasks)
    outcomes = ls.judge(answers, "train", timeouts=timeouts)
    rows = [ls.record("naive_aa", 0, "train", t, a, o) for (t, a), o in zip(answers, outcomes)]
    by_size = per_size_seconds(answers, outcomes)
    per_task = {}
    for t in tasks:
        mine = [r for r in rows if r["task"] == t]
        speedups = [r["speedup"] for r in mine if r["status"] == "OK" and r["speedup"]]
        per_task[t] = {"judged": len(mine), "ok": len(speedups),
                       "faster": sum(r["faster"] for r in mine),
                       "speedup_min": min(speedups, default=None),
                       "speedup_median": statistics.median(speedups) if speedups else None,
                       "speedup_max": max(speedups, default=None),
                       "per_size": by_size.get(t, {})}
    faster = sum(r["faster"] for r in rows)
    from results_by_machine import commit, machine
    result = {"benchmark": "naive_aa", "machine": machine(), "commit": commit(),
              "date": time.strftime("%Y-%m-%d"), "repeats": args.repeats,
              "measure_overrides": ls.MEASURE_OVERRIDES, "measure_timeouts": timeouts,
              "judged": len(rows), "faster": faster, "share_faster": faster / len(rows),
              "per_task": per_task, "records": rows}
    print("| task | judged | OK | counted faster | speedup min / median / max |")
    print("|---|---|---|---|---|")
    for t, c in per_task.items():
        spread = ("-" if c["speedup_median"] is None else
                  f"{c['speedup_min']:.2f} / {c['speedup_median']:.2f} / {c['speedup_max']:.2f}")
        print(f"| {t} | {c['judged']} | {c['ok']} | {c['faster']} | {spread} |")
    print(f"\nthe naive kernel counted faster: {faster} of {len(rows)} "
          f"({faster / len(rows):.1%})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
