"""What one change to the learning experiment did: two runs' reports, paired by task and seed.

    python benchmarks/learning_lever.py BEFORE.json AFTER.json [--json OUT.json]

BEFORE and AFTER are `learning_speed.py --json` reports of two runs that differ in one lever
(e.g. `--rewrite-pairs 4`) and share the rest: the model, prompts, sampler seeds and SFT seeds.
Per trained arm (control = SFT, grpo = SFT then GRPO) and split, for the share faster, the
share correct, and the share correct and not the naive kernel handed back: each run's mean and
AFTER minus BEFORE with a 95% bootstrap interval clustered by task and by seed, the two runs
drawn together on the (seed, task) cells they share (`learning_speed.clustered_bootstrap`), so
the difference is paired. Only seeds both runs have are compared. Errors are one line, exit 2.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from learning_speed import REPS, cells_of, clustered_bootstrap

ARMS = ("control", "grpo")
SPLITS = ("train", "heldout_sizes", "heldout_task")
MEASURES = {  # name -> a sample's value
    "faster": lambda r: float(bool(r["faster"])),
    "correct": lambda r: float(r["status"] == "OK"),
    "correct_changed": lambda r: float(r["status"] == "OK" and not r.get("naive_copy")),
}


def compare(before: list[dict], after: list[dict], reps: int = REPS) -> dict:
    """arm -> split -> measure -> {before, after, diff, diff_low, diff_high, cells}."""
    import numpy as np

    from perfgym.metrics import arm_mean
    out: dict = {}
    # each measure as a field of every record, so learning_speed.cells_of reads it
    before, after = ([{**r, **{n: v(r) for n, v in MEASURES.items()}} for r in rows]
                     for rows in (before, after))
    for arm in ARMS:
        for split in SPLITS:
            for name in MEASURES:
                a, b = cells_of(before, arm, split, name), cells_of(after, arm, split, name)
                shared = set(a) & set(b)
                if not shared:
                    continue
                a = {k: a[k] for k in shared}
                b = {k: b[k] for k in shared}
                drawn = clustered_bootstrap([a, b], reps)
                low, high = np.quantile(drawn[1] - drawn[0], [0.025, 0.975])
                mean_a, mean_b = arm_mean(a), arm_mean(b)
                out.setdefault(arm, {}).setdefault(split, {})[name] = {
                    "before": mean_a, "after": mean_b, "diff": mean_b - mean_a,
                    "diff_low": float(low), "diff_high": float(high),
                    "cells": len(shared), "seeds": sorted({s for s, _ in shared})}
    return out


def load(path: Path) -> list[dict]:
    try:
        rows = json.loads(path.read_text())["per_sample"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"error: {path} is not a learning_speed.py --json report ({e}); "
                         "give the reports of two runs") from None
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--json", type=Path, help="write the comparison here")
    args = ap.parse_args(argv)
    try:
        result = compare(load(args.before), load(args.after))
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    if not result:
        print("error: the two reports share no (seed, task) cell of a trained arm; compare "
              "runs of the same seeds", file=sys.stderr)
        return 2
    print(f"{'arm':8} {'split':14} {'measure':16} {'before':>7} {'after':>7}  after - before [95% CI]")
    for arm, splits in result.items():
        for split, measures in splits.items():
            for name, m in measures.items():
                print(f"{arm:8} {split:14} {name:16} {m['before']:7.1%} {m['after']:7.1%}  "
                      f"{m['diff'] * 100:+.1f} [{m['diff_low'] * 100:+.1f}, "
                      f"{m['diff_high'] * 100:+.1f}] points")
    if args.json:
        args.json.write_text(json.dumps({"before": str(args.before), "after": str(args.after),
                                         "comparison": result}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
