"""Draws of the no-flag search, two ways, paired by seed: which prompt should a search use?

    python experiments/search_draws/search_draws.py [--seeds 4,5,6,7] [--json OUT]
        [--arm NAME=FLAGS ...]   (default: coder = no flags; perfgym = --templates
                                  benchmarks/prompt_variants/rules)

Each (seed, arm) is one `benchmarks/first_search.py` run: `perfgym search --seed S FLAGS` on
dgemm-256 with the default model, timed from the command line. The arms alternate within a
seed, so a drift of the machine falls on both. Writes every draw as it ends (a killed run keeps
the draws it finished) and, per arm, the share of draws whose best kernel is at least 3x the
naive one and the geometric mean of the best speedups; and the paired ratio of the two arms'
best speedups (same seed) with a 95% percentile bootstrap CI over seeds.
"""
from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks"  # first_search.py
sys.path.insert(0, str(BENCHMARKS))  # and search_compare.py's bootstrap

ARMS = {"coder": [], "perfgym": ["--templates", "benchmarks/prompt_variants/rules"]}
GOAL = 3.0  # the goal for the no-flag search: a kernel >= 3x the naive one


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="4,5,6,7")
    ap.add_argument("--arm", action="append", default=None, metavar="NAME=FLAGS")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        raise SystemExit("--seeds takes integers, comma-separated (e.g. 4,5,6,7)")
    arms = ARMS if not args.arm else {
        name: shlex.split(flags) for name, _, flags in (a.partition("=") for a in args.arm)}
    if len(arms) != 2:
        raise SystemExit("give two arms (--arm NAME=FLAGS twice), or none for the default two")
    draws: list[dict] = []
    started = time.monotonic()
    for k, seed in enumerate(seeds):
        order = list(arms) if k % 2 == 0 else list(arms)[::-1]
        for arm in order:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "draw.json"
                run = subprocess.run([sys.executable, str(BENCHMARKS / "first_search.py"),
                                      "--run-dir", str(Path(tmp) / "run"), "--json", str(out), "--",
                                      "--seed", str(seed), *arms[arm]],
                                     capture_output=True, text=True)
                if run.returncode != 0:
                    draw = {"seed": seed, "arm": arm, "failed": run.stderr[-500:]}
                else:
                    d = json.loads(out.read_text())
                    draw = {"seed": seed, "arm": arm, "best_speedup": d["best_speedup"] or 1.0,
                            "wall_seconds": d["wall_seconds"], "answers": d["answers"],
                            "command": d["command"], "model": d["model"]["name"],
                            "machine": d["machine"]}
            draws.append(draw)
            print(f"seed {seed} {arm}: {draw.get('best_speedup', 'failed')} "
                  f"[{time.monotonic() - started:.0f} s]", file=sys.stderr, flush=True)
            write(args.json, arms, draws)
    print(json.dumps(write(args.json, arms, draws), indent=1))


def write(path: str | None, arms: dict, draws: list[dict]) -> dict:
    result = {"arms": {name: shlex.join(flags) for name, flags in arms.items()},
              "goal": GOAL, "draws": draws, "summary": summary(list(arms), draws)}
    if path:
        Path(path).write_text(json.dumps(result, indent=1) + "\n")
    return result


def summary(arms: list[str], draws: list[dict]) -> dict:
    from perfgym.metrics import geomean
    from search_compare import summarize  # its percentile bootstrap of a mean of logs
    best = {(d["seed"], d["arm"]): d["best_speedup"] for d in draws if "best_speedup" in d}
    out: dict = {}
    for arm in arms:
        xs = [v for (s, a), v in best.items() if a == arm]
        out[arm] = {"draws": len(xs), "at_goal": sum(x >= GOAL for x in xs),
                    "geomean": geomean(xs) if xs else None}
    a, b = arms
    logs = [math.log(best[(s, a)] / best[(s, b)]) for s in sorted({s for s, _ in best})
            if (s, a) in best and (s, b) in best]
    if logs:  # one task: the seeds are resampled
        s = summarize({"dgemm": logs})
        out[f"{a} / {b}"] = {"pairs": len(logs), "ratio": s["geomean"], "ci95": s["ci95"]}
    return out


if __name__ == "__main__":
    main()
