"""A task's expert kernel and perfgym's own rewrites of its naive kernel (search/rewrites.py:
each rule's printed form, and omp_outer's edit-if and edit-if-loop line edits), judged at the
train and the held-out sizes, as the speedup over the naive kernel per size and folded.

    python benchmarks/rewrite_forms.py [--task colsum] [--json OUT]

Why: a rule's kernel is what `--rewrite-pairs` teaches the student and what the climb tries
first; this shows what each form is worth at every size, beside the expert, on this machine.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="colsum")
    ap.add_argument("--json", default=None, metavar="OUT")
    args = ap.parse_args()

    from perfgym import EvalConfig, get_task
    from perfgym.multisize import evaluate_sizes
    from perfgym.search.rewrites import applicable, line_edit
    from perfgym.tasks import TaskError
    try:
        task = get_task(args.task)
    except TaskError as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)
    naive, entry = task.baseline.read_text(), task.signature.name
    forms = {"expert": task.expert.read_text() if task.expert else None,
             **applicable(naive, entry),
             "omp_outer edit-if": line_edit(naive, entry, "omp_outer", gate="work"),
             "omp_outer edit-if-loop": line_edit(naive, entry, "omp_outer", gate="loop")}
    rows = []
    for split in ("train", "heldout"):
        for name, code in forms.items():
            if code is None:
                continue
            o = evaluate_sizes(task, f"```c\n{code}```", task.sizes(split), EvalConfig())
            per = [(p.get("status"), p.get("speedup")) for p in o.per_size]
            rows.append({"split": split, "form": name, "status": o.status.value,
                         "speedup": o.speedup, "per_size": per})
            shown = ", ".join(f"{s:.2f}" if s else st for st, s in per)
            print(f"{split:8s} {name:18s} {o.status.value:13s} "
                  f"{o.speedup or 0:5.2f}x  ({shown})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"task": args.task, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
