"""A prompt change measured: two yield runs of one model, and the difference with its CI.

    python benchmarks/default_yield.py --model coder --templates benchmarks/prompt_variants/rules \\
        --json A.json          (arm A: the rule in words, perfgym's own prompt, kept as a variant)
    python benchmarks/default_yield.py --model coder --json B.json
                               (arm B: the coder's own prompts, with the worked OpenMP example)
    python experiments/prompt_ab/prompt_ab.py A.json B.json [--setting coder] [--json OUT]

For the default (135M) model: `default_yield.py --only default` (arm A, perfgym's prompt) and
`--only default --templates src/perfgym/prompts/worked_example` (arm B), then `--setting
default` here.

For each share (compile, correct, faster than naive) the two arms' means over tasks and B - A
with a 95% bootstrap CI: tasks resampled (the same ones for both arms: a paired comparison),
and each task's answers resampled within it from its stored counts. Per task, the counts come
from each run's `statuses` and shares, so the interval can be recomputed from the JSON files.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

SHARES = ("compile", "correct", "faster_than_naive")


def arm(path: str, setting: str) -> dict:
    data = json.loads(Path(path).read_text())
    if setting not in data.get("settings", {}):
        raise SystemExit(f"{path}: no setting {setting!r} (it has "
                         f"{', '.join(data.get('settings', {})) or 'none'})")
    return data["settings"][setting]


def counts(row: dict) -> tuple[int, dict[str, int]]:
    n = sum(row["statuses"].values())
    return n, {s: round(row[s] * n) for s in SHARES}


def compare(a: dict, b: dict, draws: int = 10000, seed: int = 0) -> dict:
    tasks = sorted(set(a["tasks"]) & set(b["tasks"]))
    rng = np.random.default_rng(seed)
    result = {"tasks": tasks, "answers_per_task": {}, "shares": {}}
    for share in SHARES:
        na, ka = np.array([counts(a["tasks"][t])[0] for t in tasks]), \
            np.array([counts(a["tasks"][t])[1][share] for t in tasks])
        nb, kb = np.array([counts(b["tasks"][t])[0] for t in tasks]), \
            np.array([counts(b["tasks"][t])[1][share] for t in tasks])
        pick = rng.integers(0, len(tasks), size=(draws, len(tasks)))
        # each picked task's answers drawn again from its own share
        ra = rng.binomial(na[pick], ka[pick] / na[pick]) / na[pick]
        rb = rng.binomial(nb[pick], kb[pick] / nb[pick]) / nb[pick]
        diff = rb.mean(axis=1) - ra.mean(axis=1)
        result["shares"][share] = {
            "A": float((ka / na).mean()), "B": float((kb / nb).mean()),
            "B_minus_A": float((kb / nb).mean() - (ka / na).mean()),
            "ci95": [float(np.percentile(diff, 2.5)), float(np.percentile(diff, 97.5))],
            "B_ci95": [float(np.percentile(rb.mean(axis=1), 2.5)),
                       float(np.percentile(rb.mean(axis=1), 97.5))]}
    result["answers_per_task"] = {t: [counts(a["tasks"][t])[0], counts(b["tasks"][t])[0]]
                                  for t in tasks}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="arm A: a default_yield.py JSON file")
    ap.add_argument("b", help="arm B: a default_yield.py JSON file")
    ap.add_argument("--setting", default="coder", help="the setting both files hold")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    a, b = arm(args.a, args.setting), arm(args.b, args.setting)
    result = {"A": args.a, "B": args.b, "setting": args.setting, **compare(a, b),
              "per_task": {t: {s: [a["tasks"][t][s], b["tasks"][t][s]] for s in SHARES}
                           for t in sorted(set(a["tasks"]) & set(b["tasks"]))}}
    for share, r in result["shares"].items():
        print(f"{share:18s} A {r['A']:.0%}  B {r['B']:.0%}  B - A {r['B_minus_A']:+.0%} "
              f"[{r['ci95'][0]:+.0%}, {r['ci95'][1]:+.0%}]")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
