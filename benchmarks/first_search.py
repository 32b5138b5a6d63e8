"""A new user's first search: `perfgym search` with no flags (dgemm, the default model and
algorithm), timed from the command line, its best verified speedup over the naive kernel.

    python benchmarks/first_search.py [--run-dir runs/first_search]
                                      [--json benchmarks/results/first_search.json]
                                      [-- SEARCH FLAGS]

Flags after `--` go to `perfgym search` as they are (to compare a candidate default with the
no-flag search: `-- --algo evolve --seed 2`); the JSON's `command` names them.

The model is fetched before the clock starts (`perfgym model fetch`, the first use's cost, is
reported apart). Writes `wall_seconds`, `best_speedup` (over naive), the best kernel's GFLOP/s
and its fraction of the shipped expert's, the answers' counts, the best kernel at the held-out
sizes, the model and the machine; `confirmed`, the best timed again against the naive kernel
at the default size in interleaved runs (after a search judged at a size set, as the no-flag
one is, `best_speedup` and `best_gflops` are the best's figures at the default size). The best
is the search's result: its fastest kernel that is
also right at the train sizes; a faster one that is not is `fastest_at_search_size`, and the
kernels passed over are `passed_over`.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default="runs/first_search")
    ap.add_argument("--json", default=None)
    args, flags = ap.parse_known_args()
    flags = [f for f in flags if f != "--"]
    from perfgym.machine import cpu_model
    from perfgym.models import model_identity, search_default_model
    model = search_default_model()
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "perfgym.cli", "model", "fetch", model], check=True,
                   capture_output=True)
    fetch_seconds = time.monotonic() - started
    run_dir = Path(args.run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perfgym.cli", "search", "--run-dir",
                           str(run_dir), "--json", *flags], capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"perfgym search failed ({done.returncode}): {done.stderr[-800:]}")
    result = json.loads(done.stdout)
    best = result["best"] or {}
    # a search judged at a size set: the best's own figures at the default size, as the
    # expert's
    from perfgym import get_task
    default_size = get_task("dgemm").default_size
    best = next((dict(best, **part) for part in best.get("per_size", [])
                 if part.get("sizes") == default_size), best)
    expert = expert_gflops(best.get("sizes"))
    out = {"command": " ".join(["perfgym search", *flags]), "wall_seconds": round(wall, 1),
           "model_fetch_seconds": round(fetch_seconds, 1), "model": model_identity(model),
           "machine": cpu_model(), "best_id": result["best_id"],
           "best_speedup": best.get("speedup"), "best_gflops": best.get("gflops"),
           "confirmed": result.get("confirmed"),
           "best_message": best.get("message"), "expert_gflops": expert,
           "fraction_of_expert": (best["gflops"] / expert if expert and best.get("gflops")
                                  else None),
           "fastest_at_search_size": ({k: result["fastest"].get(k)
                                       for k in ("id", "speedup", "gflops", "message")}
                                      if result.get("fastest") else None),
           "passed_over": result.get("passed_over", []),
           "answers": result["answers"], "failure_causes": result["failure_causes"],
           "heldout": heldout_rows(run_dir)}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


def heldout_rows(run_dir: Path) -> list:
    """The best kernel judged at the held-out sizes no search step saw (the report's table)."""
    from perfgym.store import RunStore
    store = RunStore(run_dir)
    try:
        return [row for _, _, data in store.events("heldout") for row in data["rows"]]
    finally:
        store.close()


def expert_gflops(size) -> float | None:
    """The shipped expert dgemm's GFLOP/s at the search's size, measured now."""
    from perfgym import EvalConfig, evaluate, get_task
    task = get_task("dgemm")
    o = evaluate(task, task.expert.read_text(), size, EvalConfig(use_cache=False))
    return o.gflops if o.ok else None


if __name__ == "__main__":
    main()
