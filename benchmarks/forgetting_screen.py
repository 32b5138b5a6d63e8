"""What a student writes on the tasks it forgets, sampled as learning_speed.py's evaluation
samples it (OpenVINO, EVAL_SAMPLING: temperature 0.3; this machine's prompts in the run's
answer form), many answers and no judging: a minute where an evaluation takes ten.

    python benchmarks/forgetting_screen.py MODEL [MODEL ...] [--n 40] [--tasks prefix_sum,dot]
        [--answer-form edits|code] [--seed 77] [--json OUT.json]

MODEL is a merged SFT model (runs/.../sft_seedS/merged) or a GRPO adapter (runs/.../seedS/final).
Each answer is sorted by the pragma it adds: none (a hand-back, or another edit), one with a
`reduction` clause, a `parallel` one without (the race on dot and on the scan), or another.
The kinds are a screen, not a verdict: the gym judges answers; this counts what the student
writes often enough to tell two students apart (5 answers a task, the evaluation's, do not).
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learning  # noqa: E402
import learning_speed as ls  # noqa: E402

KINDS = ("no pragma", "reduction", "parallel, no reduction", "other pragma")


def kind(answer: str) -> str:
    if "#pragma" not in answer:
        return "no pragma"
    if "reduction" in answer:
        return "reduction"
    return "parallel, no reduction" if "parallel" in answer else "other pragma"


def screen(model: Path, tasks: list[str], n: int, seed: int, form: str) -> dict:
    templates = ls.EDIT_PROMPTS if form == "edits" else None
    answers = learning.sample(model, tasks, n, seed, None, templates,
                              config=ls.eval_config(), opened=form == "code")
    return {t: dict(collections.Counter(kind(a) for tt, a in answers if tt == t))
            for t in tasks}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--n", type=int, default=40, help="answers a task (default 40)")
    ap.add_argument("--tasks", default="prefix_sum,dot")
    ap.add_argument("--answer-form", choices=("edits", "code"), default="edits")
    ap.add_argument("--seed", type=int, default=77, help="the sampler's seed (default 77)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if bad := [t for t in tasks if t not in ls.TRAIN_TASKS + ls.HELDOUT_TASKS]:
        sys.exit(print(f"--tasks takes tasks of the experiment; got {bad[0]!r}",
                       file=sys.stderr) or 2)
    if missing := [m for m in args.models if not m.is_dir()]:
        sys.exit(print(f"no model directory at {missing[0]}: give a merged SFT model or a "
                       "GRPO adapter directory", file=sys.stderr) or 2)
    if args.n < 1:
        sys.exit(print(f"--n is at least 1, got {args.n}", file=sys.stderr) or 2)
    rows = []
    for model in args.models:
        counts = screen(model, tasks, args.n, args.seed, args.answer_form)
        for t in tasks:
            print(f"{model}  {t}: " + ", ".join(f"{k} {counts[t].get(k, 0)}" for k in KINDS
                                                if counts[t].get(k)) + f" (of {args.n})")
            rows.append({"model": str(model), "task": t, "n": args.n, "counts": counts[t]})
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, "answer_form": args.answer_form,
                                         "sampling": learning.EVAL_SAMPLING,
                                         "machine": ls.this_machine(),
                                         "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
