"""Evolve vs SQD vs best-of-n at the same number of evaluations, with a real model.

    python benchmarks/search_compare.py [--model-path DIR | --policy openai --model NAME]
                                        [--tasks dgemm,dot] [--evals 16] [--out DIR]

Each (task, algorithm) is one `perfgym search` run with the same policy, model and sampling, sized so that it evaluates `--evals` candidates besides the seed:
    best-of-n   n = E
    sqd         1 iteration, G = E/2 (the seed improved and deepened)
    evolve      2 islands x E/4 generations x 2 children
Then, per run: the best GFLOP/s, fast_1 (share of candidates correct and faster than the naive
kernel), the status mix, and the held-out pass rate of the best kernel (the task's held-out
sizes, which the search never saw). Results go to OUT/results.json and OUT/table.md; every run
directory stays for `perfgym report`. Rerunning skips finished runs.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def algo_args(algo: str, evals: int) -> list[str]:
    if algo == "best-of-n":
        return ["--algo", "best-of-n", "--n", str(evals)]
    if algo == "sqd":
        return ["--algo", "sqd", "--iterations", "1", "--G", str(evals // 2)]
    return ["--algo", "evolve", "--islands", "2", "--generations", str(evals // 4),
            "--children", "2", "--migrate-every", "1"]


def run(task: str, algo: str, args, run_dir: Path) -> None:
    if (run_dir / "done").is_file():
        return
    model = (["--model-path", str(args.model_path)] if args.policy == "hf" else
             ["--model", args.model])  # openai: the server from $OPENAI_BASE_URL
    cmd = [sys.executable, "-m", "perfgym.cli", "search", "--task", task, "--policy",
           args.policy, *model, "--run-dir", str(run_dir),
           "--max-tokens", str(args.max_tokens), "--temperature", str(args.temperature),
           "--json", *algo_args(algo, args.evals)]
    if (run_dir / "run.sqlite").is_file():
        cmd.append("--resume")
    started = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{task}/{algo} failed:\n{r.stderr[-3000:]}")
    (run_dir / "done").write_text(f"{time.time() - started:.0f}\n")


def measure(task_name: str, run_dir: Path) -> dict:
    from perfgym import EvalConfig, evaluate, get_task
    from perfgym.store import RunStore
    store = RunStore(run_dir)
    cands = [c for c in store.candidates() if c.op != "seed" and not c.pending]
    best = store.best()
    fast = [c for c in cands if c.ok and (c.outcome.get("speedup") or 0) > 1.0]
    task = get_task(task_name)
    heldout = task.sizes("heldout")
    passed = 0
    if best is not None and best.op != "seed":
        for size in heldout:
            o = evaluate(task, best.completion, size, EvalConfig(max_time=0.3, max_samples=5))
            passed += o.ok
    result = {"task": task_name, "candidates": len(cands),
              "statuses": dict(Counter(c.status for c in cands)),
              "best_gflops": best.gflops if best is not None and best.op != "seed" else None,
              "seed_gflops": next((c.gflops for c in store.candidates() if c.op == "seed"),
                                  None),
              "fast_1": len(fast) / len(cands) if cands else 0.0,
              "heldout_pass": f"{passed}/{len(heldout)}" if best is not None and
              best.op != "seed" else "-",
              "seconds": float((run_dir / "done").read_text())}
    store.close()
    return result


def table(results: dict) -> str:
    lines = ["| task | algorithm | candidates | OK | best GFLOP/s (naive) | fast_1 | held-out "
             "pass of the best | wall |", "|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        task, algo = key.split("/")
        best = f"{r['best_gflops']:.2f}" if r["best_gflops"] else "-"
        seed = f"{r['seed_gflops']:.2f}" if r["seed_gflops"] else "-"
        lines.append(f"| {task} | {algo} | {r['candidates']} | {r['statuses'].get('OK', 0)} | "
                     f"{best} ({seed}) | {r['fast_1']:.2f} | {r['heldout_pass']} | "
                     f"{r['seconds'] / 60:.1f} min |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default="hf", choices=("hf", "openai"))
    ap.add_argument("--model-path", type=Path, help="hf: a model directory (default model if "
                    "absent)")
    ap.add_argument("--model", help="openai: the served model's name")
    ap.add_argument("--tasks", default="dgemm,dot")
    ap.add_argument("--evals", type=int, default=16, help="a multiple of 4")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--out", type=Path, default=Path("runs/search_compare"))
    args = ap.parse_args()
    if args.policy == "openai" and not args.model:
        raise SystemExit("--policy openai needs --model (and $OPENAI_BASE_URL)")
    if args.policy == "hf" and args.model_path is None:
        from perfgym.models import resolve_model
        args.model_path = resolve_model(None)
    if args.evals < 4 or args.evals % 4:
        raise SystemExit("--evals must be a positive multiple of 4")
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for task in args.tasks.split(","):
        for algo in ("best-of-n", "sqd", "evolve"):
            run_dir = args.out / task / algo
            log(f"{task} / {algo} ...")
            run(task, algo, args, run_dir)
            results[f"{task}/{algo}"] = measure(task, run_dir)
            log(f"{task} / {algo}: {results[f'{task}/{algo}']}")
            (args.out / "results.json").write_text(json.dumps(results, indent=2))
    (args.out / "table.md").write_text(table(results))
    print(table(results))


if __name__ == "__main__":
    main()
