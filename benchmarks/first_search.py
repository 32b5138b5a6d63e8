"""A new user's search: `perfgym search` with no flags but the task and the sampler's seed,
timed from the command line, its result judged at the train and held-out sizes and timed again
against the naive kernel. One draw a run; the JSON collects draws.

    python benchmarks/first_search.py [--task dgemm] [--seed 1] [--run-dir runs/first_search]
                                      [--json benchmarks/results/first_search.json]
                                      [-- OTHER SEARCH FLAGS]

The model is fetched and the engine's settings for this machine chosen before the clock
starts (`perfgym model fetch` and `perfgym.engine.probe`, the first use's costs, reported
apart). A dgemm draw goes to `draws`, with the machine (CPU model, generation and ISA flags), the
wall time, the answers, `train_geomean_speedup` (the result's speedup over naive as the
geometric mean over the train sizes: what the search judged), `confirmed` (timed again against
naive at the default size in 5 interleaved runs: `speedup`, `low` at 95%), the held-out sizes'
geometric mean and whether it was right at each, and `fraction_of_expert` (its GFLOP/s at the
default size over the shipped expert's, measured now), and `engine`: the policy each model
answer records (openvino, or vllm where the probe took vLLM's CPU build) and the probe's stored
choice and rows. Another task's draw goes to `tasks`. Rows of other draws, tasks, machines and
engines are kept.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from results_by_machine import machine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="dgemm")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--run-dir", default="runs/first_search")
    ap.add_argument("--json", default=None)
    args, flags = ap.parse_known_args()
    flags = [f for f in flags if f != "--"]
    from perfgym.models import search_default_model
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "perfgym.cli", "model", "fetch",
                    search_default_model()], check=True, capture_output=True)
    fetch_seconds = time.monotonic() - started
    started = time.monotonic()  # the engine's settings for this machine: chosen once
    subprocess.run([sys.executable, "-c", "from perfgym.policies.openvino import "
                    "_measured_settings; from perfgym.models import named_gguf, "
                    "search_default_model; _measured_settings(named_gguf(search_default_model()))"],
                   check=True)
    probe_seconds = time.monotonic() - started
    run_dir = Path(args.run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    command = ["search", "--task", args.task, "--seed", str(args.seed), "--run-dir",
               str(run_dir), "--json", *flags]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perfgym.cli", *command],
                          capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"perfgym search failed ({done.returncode}): {done.stderr[-800:]}")
    result = json.loads(done.stdout)
    best = result["best"] or {}
    confirmed = result.get("confirmed") or {}
    heldout = heldout_row(run_dir, result["best_id"])
    here = machine(every_flag=True)
    draw = {"task": args.task, "seed": args.seed, "command": "perfgym " + " ".join(command),
            "machine": here,
            "date": time.strftime("%Y-%m-%d"), "commit": _commit(),
            "wall_seconds": round(wall, 1), "model_fetch_seconds": round(fetch_seconds, 1),
            "engine_probe_seconds": round(probe_seconds, 1),
            "answers": result["answers"]["answers"], "answer_counts": result["answers"],
            "best_id": result["best_id"], "best_message": best.get("message"),
            "train_geomean_speedup": best.get("speedup"),
            "confirmed": ({"speedup": confirmed.get("speedup"),
                           "low": confirmed.get("speedup_low")}
                          if "speedup" in confirmed else confirmed or None),
            "heldout_geomean_speedup": heldout.get("speedup"),
            "heldout_all_ok": heldout.get("status") == "OK" if heldout else None,
            "heldout": heldout or None,
            "failure_causes": result["failure_causes"], "code": best_code(run_dir),
            "engine": engine_row(run_dir)}
    if args.task == "dgemm":
        draw["fraction_of_expert"] = fraction_of_expert(best)
    print(json.dumps(draw, indent=1))
    if args.json:
        path = Path(args.json)
        old = json.loads(path.read_text()) if path.exists() else {}
        key = "draws" if args.task == "dgemm" else "tasks"
        if key == "tasks":
            draw["confirmed_low"] = (draw["confirmed"] or {}).get("low")
        def kind(r):  # a draw on another engine is another row
            return (r["task"], r["seed"], r["machine"]["cpu"], r["machine"].get("family"),
                    tuple(r["machine"]["isa"]), (r.get("engine") or {}).get("probe_choice"))
        rows = [r for r in old.get(key, []) if kind(r) != kind(draw)]
        path.write_text(json.dumps({**old, key: rows + [draw]}, indent=1) + "\n")


def engine_row(run_dir: Path) -> dict:
    """Which engine wrote the model's answers (the policy each answer records: openvino, or
    vllm where the probe took it) and the probe's stored choice for this machine."""
    import collections

    from perfgym.engine.probe import choice_path
    from perfgym.models import named_gguf, search_default_model
    from perfgym.store import RunStore
    store = RunStore(run_dir)
    try:
        policies = collections.Counter(c.policy for c in store.candidates()
                                       if c.policy not in ("perfgym", "seed"))
    finally:
        store.close()
    path = choice_path(named_gguf(search_default_model()))
    chosen = json.loads(path.read_text()) if path.is_file() else {}
    return {"policies": dict(policies), "probe_choice": chosen.get("name"),
            "probe_rows": chosen.get("rows")}


def heldout_row(run_dir: Path, best_id) -> dict:
    """The result judged at the held-out sizes no search step saw (the report's table)."""
    from perfgym.store import RunStore
    store = RunStore(run_dir)
    try:
        rows = [row for _, _, data in store.events("heldout") for row in data["rows"]
                if row["candidate"] == best_id]
        return rows[-1] if rows else {}
    finally:
        store.close()


def best_code(run_dir: Path) -> str | None:
    from perfgym.report.summary import _code
    from perfgym.search.general import search_result
    from perfgym.store import RunStore
    store = RunStore(run_dir)
    try:
        best = search_result(store)
        return _code(best.completion) if best is not None else None
    finally:
        store.close()


def fraction_of_expert(best: dict) -> float | None:
    """The result's GFLOP/s at dgemm's default size over the shipped expert's, measured now."""
    from perfgym import EvalConfig, evaluate, get_task
    task = get_task("dgemm")
    part = next((p for p in best.get("per_size", []) if p.get("sizes") == task.default_size),
                best)
    expert = evaluate(task, task.expert.read_text(), task.default_size,
                      EvalConfig(use_cache=False))
    if not (expert.ok and part.get("gflops")):
        return None
    return part["gflops"] / expert.gflops


def _commit() -> str | None:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True)
    return done.stdout.strip() or None


if __name__ == "__main__":
    main()
