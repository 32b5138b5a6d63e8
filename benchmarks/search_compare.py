"""SQD vs evolve vs refine vs best-of-n at equal candidates, with a real model, over seeds.

    python benchmarks/search_compare.py [--model-path coder] [--policy openvino]
        [--tasks dgemm,dgemv,dot,stencil3d] [--seeds 1,2,3] [--evals 32]
        [--budget-minutes M] [--heldout] [--out runs/search_compare]
        [--json benchmarks/results/search_compare.json]

A cell is one `perfgym search` run of one algorithm on one task with one `--seed`, all with the
same model, policy and sampler (the model's measured one, as `perfgym search` with no flags,
unless --temperature etc. say otherwise). Every run gets `--max-candidates E`: it stops after E
candidates besides the seed (the naive kernel), whatever its algorithm plans, and its flags are
sized so that it plans at least E:

    sqd        the paper's stages (1-6, ratios 0.4/0.3/0.3), G = --G, ceil(E/G) iterations
    evolve     2 islands x 4 children x ceil(E/8) generations
    refine     4 chains x ceil(E/4) turns
    best-of-n  n = E

How many were evaluated is read back from the run store and recorded (`evaluated`, `exact`).
Per run: the best speedup over the naive kernel (1.0 when nothing beat it: the naive kernel is
what one keeps), the best GFLOP/s, the best-so-far GFLOP/s and speedup after each candidate
(index 0: the naive kernel) and after each iteration, the status mix, wall seconds. The
search's held-out judging of its best kernel is off unless --heldout (about 45 s a run here).

Per algorithm: the geometric mean of the best speedups (the mean of logs over a task's seeds,
then over tasks, so each task weighs the same) with a 95% bootstrap CI (seeds resampled within
each task); for each pair of algorithms the paired ratio of those geometric means (the mean
over tasks of the mean over seeds of log A - log B, the same task and seed on both sides) with
its bootstrap CI. Only (task, seed) groups that every algorithm finished count, so a run cut
short compares like with like.

Cells run round-robin: seed 1 of every algorithm on every task, then seed 2, ...; within a
(task, seed) group the algorithms take turns at going first (a busy spell of the machine does
not always fall on the same one). `--budget-minutes` starts no cell after that much wall time,
so a cut run is balanced up to one group. A finished cell has a `done` marker and is not run
again; a half-run one is resumed (`--resume`); a failed one is recorded with its cause and the
others go on. Progress lines go to stderr; the JSON is rewritten after every cell, with a plot
next to it (best-so-far GFLOP/s against candidates evaluated, one panel per task, one line per
algorithm: the mean over seeds, the band their range).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ALGOS = ("sqd", "evolve", "refine", "best-of-n")
# built-in C tasks where the coder's one-shot answers beat the naive kernel
# (benchmarks/results/default_yield.json, setting `coder`): dgemm 1.95x, dgemv 2.08x, dot 1.95x,
# stencil3d 1.46x; two short kernels and two loop nests
TASKS = "dgemm,dgemv,dot,stencil3d"
FASTER = 1.1  # a copy of the naive kernel measures 0.9-1.1x (default_yield.FASTER)
BOOTSTRAP = 10_000


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def algo_args(algo: str, evals: int, g: int) -> list[str]:
    """Flags that plan at least `evals` candidates; --max-candidates cuts them to exactly that
    (an SQD iteration's count depends on what passed, so no flags alone hit it)."""
    cap = ["--max-candidates", str(evals)]
    if algo == "best-of-n":
        return ["--algo", "best-of-n", "--n", str(evals), *cap]
    if algo == "sqd":  # every iteration expands the seed at least: G candidates or more
        return ["--algo", "sqd", "--G", str(g), "--iterations", str(math.ceil(evals / g)),
                *cap]
    if algo == "evolve":
        return ["--algo", "evolve", "--islands", "2", "--children", "4", "--generations",
                str(math.ceil(evals / 8)), *cap]
    if algo == "refine":  # 4 chains: the engine generates them as one batch
        return ["--algo", "refine", "--chains", "4", "--turns", str(math.ceil(evals / 4)), *cap]
    raise ValueError(f"unknown algorithm {algo!r}")


def plan(tasks: list[str], seeds: list[int], algos=ALGOS) -> list[tuple[int, str, str]]:
    """(seed, task, algo) cells, round-robin: every algorithm on every task at a seed before
    the next seed, so a run cut short leaves every algorithm the same (task, seed) groups but
    the last. The algorithms' order rotates from group to group."""
    cells = []
    for group, (seed, task) in enumerate(itertools.product(seeds, tasks)):
        turn = group % len(algos)
        cells += [(seed, task, algo) for algo in algos[turn:] + algos[:turn]]
    return cells


def search_cmd(task: str, algo: str, seed: int, args, run_dir: Path) -> list[str]:
    cmd = [sys.executable, "-m", "perfgym.cli", "search", "--task", task, "--seed", str(seed),
           "--policy", args.policy, "--run-dir", str(run_dir), "--json",
           *algo_args(algo, args.evals, args.G)]
    if args.policy == "openai":
        cmd += ["--model", args.model]  # the server from $OPENAI_BASE_URL
    else:
        cmd += ["--model-path", str(args.model_path)]
    for flag in ("temperature", "top_p", "top_k", "min_p", "max_tokens"):  # else the model's
        if getattr(args, flag) is not None:
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if not args.heldout:  # ~45 s a run on 2 cores, and the comparison does not use it
        cmd.append("--no-heldout")
    if (run_dir / "run.sqlite").is_file():
        cmd.append("--resume")
    return cmd


def run_cell(task: str, algo: str, seed: int, args, run_dir: Path) -> str | None:
    """Runs the search unless it is done; returns why it failed, or None."""
    if (run_dir / "done").is_file():
        return None
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(run_dir / "search.log", "a") as err:  # the whole stderr, for a post-mortem
        r = subprocess.run(search_cmd(task, algo, seed, args, run_dir), check=False,
                           stdout=subprocess.PIPE,
                           stderr=err, text=True)
    if r.returncode != 0:
        tail = (run_dir / "search.log").read_text()[-1500:].strip().splitlines()
        return f"perfgym search exited {r.returncode}: " + " | ".join(tail[-6:])
    (run_dir / "done").write_text(f"{time.monotonic() - started:.1f}\n")
    return None


def measure(run_dir: Path, evals: int) -> dict:
    """One run's record, from its store: the first `evals` candidates besides the seed, in the
    order they were generated (store ids)."""
    from perfgym.store import RunStore
    store = RunStore(run_dir)
    try:
        config = store.config() or {}
        cands = store.candidates()
        heldout = [row for _, _, data in store.events("heldout") for row in data["rows"]]
    finally:
        store.close()
    seed = next((c for c in cands if c.op == "seed"), None)
    answers = [c for c in cands if c.op != "seed" and not c.pending]
    counted = answers[:evals]
    # the naive kernel's GFLOP/s: the seed's when the algorithm measured one (sqd, evolve),
    # else from the candidates' speedups over it (refine and best-of-n have no seed)
    implied = [c.gflops / c.outcome["speedup"] for c in counted
               if c.ok and c.gflops and (c.outcome or {}).get("speedup")]
    naive = seed.gflops if seed is not None and seed.ok and seed.gflops else \
        (statistics.median(implied) if implied else None)
    best_g, best_s = naive, 1.0
    curve_g, curve_s, by_iteration = [naive], [1.0], {}
    fast = 0
    for c in counted:
        if c.ok and not c.copied and c.gflops:  # a copied memory kernel is not the search's
            best_g = max(best_g or 0.0, c.gflops)
            best_s = max(best_s, c.outcome.get("speedup") or 0.0)
            low = c.outcome.get("speedup_low")
            fast += (low > 1.0) if low is not None else (c.outcome.get("speedup") or 0) >= FASTER
        curve_g.append(best_g)
        curve_s.append(best_s)
        by_iteration[str(c.iteration)] = best_g
    found = [c.gflops for c in counted if c.ok and not c.copied and c.gflops]
    return {"evaluated": len(answers), "exact": len(answers) == evals,
            "best_speedup": best_s, "best_gflops": max(found) if found else None,
            "naive_gflops": naive, "fast_share": fast / len(counted) if counted else 0.0,
            "statuses": dict(Counter(c.status for c in counted)),
            "curve_gflops": curve_g, "curve_speedup": curve_s,
            "best_gflops_by_iteration": by_iteration,
            "heldout_of_best": heldout, "sampling": config.get("sampling"),
            "wall_seconds": float((run_dir / "done").read_text())}


# -- statistics: the bootstrap over (task, seed) runs, stratified by task --------------------

def task_mean(by_task: dict[str, list[float]]) -> float:
    """The mean over tasks of the mean over a task's runs: every task weighs the same."""
    return statistics.fmean(statistics.fmean(v) for v in by_task.values())


def bootstrap_ci(by_task: dict[str, list[float]], n: int = BOOTSTRAP, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of task_mean, resampling each task's runs with replacement (the tasks
    are fixed: the question is how much the seeds move the answer, task by task)."""
    rng = random.Random(seed)
    stats = sorted(task_mean({t: rng.choices(v, k=len(v)) for t, v in by_task.items()})
                   for _ in range(n))
    tail = (1 - level) / 2
    return stats[int(tail * (n - 1))], stats[math.ceil((1 - tail) * (n - 1))]


def summarize(by_task: dict[str, list[float]]) -> dict:
    """Mean of logs -> geometric mean and its CI."""
    lo, hi = bootstrap_ci(by_task)
    return {"geomean": math.exp(task_mean(by_task)), "ci95": [math.exp(lo), math.exp(hi)],
            "runs": sum(len(v) for v in by_task.values()), "tasks": len(by_task)}


def complete_groups(records: dict, algos=ALGOS) -> list[tuple[str, int]]:
    """(task, seed) groups that every algorithm finished without error."""
    groups = {(r["task"], r["seed"]) for r in records.values()}
    return sorted(g for g in groups if all(
        "error" not in records.get(key(g[0], g[1], a), {"error": "not run"}) for a in algos))


def aggregate(records: dict, algos=ALGOS) -> dict:
    groups = complete_groups(records, algos)
    if not groups:
        return {"groups": [], "ci": {}, "comparisons": {}}

    def logs(algo) -> dict[str, list[float]]:
        by_task: dict[str, list[float]] = {}
        for task, seed in groups:
            by_task.setdefault(task, []).append(
                math.log(records[key(task, seed, algo)]["best_speedup"]))
        return by_task

    ci = {a: summarize(logs(a)) for a in algos}
    comparisons = {}
    for a, b in itertools.combinations(algos, 2):
        la, lb = logs(a), logs(b)  # the same groups, in the same order: paired
        diff = {t: [x - y for x, y in zip(la[t], lb[t])] for t in la}
        s = summarize(diff)
        comparisons[f"{a} / {b}"] = {"ratio": s["geomean"], "ci95": s["ci95"],
                                     "pairs": s["runs"]}
    return {"groups": [list(g) for g in groups], "ci": ci, "comparisons": comparisons}


def key(task: str, seed: int, algo: str) -> str:
    return f"{task}/seed{seed}/{algo}"


def curves(records: dict, tasks: list[str], algos=ALGOS) -> dict:
    """Per task and algorithm: the best-so-far GFLOP/s after each candidate, mean over seeds
    (a run's unknown naive rate, nothing having passed, is the task's from other runs)."""
    out: dict[str, dict] = {}
    for task in tasks:
        runs = [r for r in records.values() if r["task"] == task and "error" not in r]
        naive = [r["naive_gflops"] for r in runs if r["naive_gflops"]]
        fill = statistics.median(naive) if naive else None
        for algo in algos:
            rows = [[x if x is not None else fill for x in r["curve_gflops"]]
                    for r in runs if r["algo"] == algo]
            rows = [row for row in rows if None not in row]
            if not rows:
                continue
            n = min(len(row) for row in rows)
            out.setdefault(task, {})[algo] = {
                "mean": [statistics.fmean(row[i] for row in rows) for i in range(n)],
                "min": [min(row[i] for row in rows) for i in range(n)],
                "max": [max(row[i] for row in rows) for i in range(n)], "seeds": len(rows)}
    return out


def plot(curve: dict, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tasks = list(curve)
    if not tasks:
        return
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for algo, c in curve[task].items():
            x = range(len(c["mean"]))
            (line,) = ax.plot(x, c["mean"], drawstyle="steps-post",
                              label=f"{algo} ({c['seeds']} seeds)")
            ax.fill_between(x, c["min"], c["max"], step="post", color=line.get_color(),
                            alpha=0.15)
        ax.set_title(task)
        ax.set_xlabel("candidates evaluated")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("best-so-far GFLOP/s")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default=None, help="openvino, hf or openai (default: what "
                    "`perfgym search` uses with no flags)")
    ap.add_argument("--model-path", default=None, help="local model: a name (coder, smollm2) "
                    "or path (default: perfgym search's default model)")
    ap.add_argument("--model", help="openai: the served model's name")
    ap.add_argument("--tasks", default=TASKS)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--evals", type=int, default=32, help="candidates per run besides the seed")
    ap.add_argument("--G", type=int, default=4, help="SQD's children per node")
    ap.add_argument("--temperature", type=float)
    ap.add_argument("--top-p", type=float)
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--min-p", type=float)
    ap.add_argument("--max-tokens", type=int)
    ap.add_argument("--heldout", action="store_true", help="judge each run's best kernel at "
                    "the task's held-out sizes too (recorded as heldout_of_best)")
    ap.add_argument("--budget-minutes", type=float, help="start no cell after this much time")
    ap.add_argument("--out", type=Path, default=Path("runs/search_compare"))
    ap.add_argument("--json", type=Path, help="default: OUT/search_compare.json")
    args = ap.parse_args()
    from perfgym.models import model_identity, search_default_model
    from perfgym.policies import default_local_policy
    if args.policy is None:
        args.policy = "openai" if args.model else default_local_policy()
    if args.policy == "openai" and not args.model:
        raise SystemExit("--policy openai needs --model (and $OPENAI_BASE_URL)")
    if args.policy != "openai" and args.model_path is None:
        args.model_path = search_default_model()
    if args.evals < 1:
        raise SystemExit("--evals is at least 1")
    tasks = args.tasks.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    json_path = args.json or args.out / "search_compare.json"
    cells = plan(tasks, seeds)
    from perfgym.machine import machine_info
    out = {"kind": "search_compare",
           "command": " ".join(["python", "benchmarks/search_compare.py", *sys.argv[1:]]),
           "machine": {"cpu": machine_info().get("fingerprint", {}).get("cpu"),
                       "cores": os.cpu_count()},
           "model": args.model if args.policy == "openai" else args.model_path,
           "model_id": None if args.policy == "openai" else model_identity(args.model_path),
           "settings": {"policy": args.policy, "tasks": tasks, "seeds": seeds,
                        "evals": args.evals, "algorithms": list(ALGOS), "G": args.G,
                        "flags": {a: algo_args(a, args.evals, args.G) for a in ALGOS},
                        "sampling": None, "heldout": args.heldout,
                        "budget_minutes": args.budget_minutes},
           "statistic": "best speedup over the naive kernel per run (1.0 when nothing beat "
                        "it); per algorithm the geometric mean over runs (mean of logs over a "
                        "task's seeds, then over tasks) with a 95% percentile bootstrap CI "
                        f"({BOOTSTRAP} resamples of the seeds within each task); comparisons: "
                        "the paired ratio A / B of those geometric means, same task and seed, "
                        "same bootstrap; only (task, seed) groups every algorithm finished",
           "cells_planned": len(cells)}
    json_path.parent.mkdir(parents=True, exist_ok=True)
    records: dict[str, dict] = {}
    started = time.monotonic()
    stopped = None
    for i, (seed, task, algo) in enumerate(cells, 1):
        run_dir = args.out / task / f"seed{seed}" / algo
        elapsed = time.monotonic() - started
        if not (run_dir / "done").is_file() and args.budget_minutes is not None \
                and elapsed > args.budget_minutes * 60:
            stopped = f"budget of {args.budget_minutes} min spent before cell {i}"
            log(stopped)
            break
        log(f"cell {i}/{len(cells)}: {task} seed {seed} {algo} "
            f"({elapsed / 60:.1f} min so far)")
        record = {"task": task, "seed": seed, "algo": algo, "run_dir": str(run_dir)}
        error = run_cell(task, algo, seed, args, run_dir)
        if error is None:
            try:
                record.update(measure(run_dir, args.evals))
            except Exception as exc:  # a broken store is this cell's failure, not the run's
                error = f"measuring: {type(exc).__name__}: {exc}"
        if error is not None:
            record["error"] = error
            log(f"  FAILED: {error}")
        else:
            log(f"  {record['evaluated']} evaluated, best {record['best_speedup']:.2f}x "
                f"naive, {record['wall_seconds']:.0f} s, {record['statuses']}")
            out["settings"]["sampling"] = out["settings"]["sampling"] or record["sampling"]
        records[key(task, seed, algo)] = record
        write(out, records, tasks, json_path, time.monotonic() - started, stopped)
    write(out, records, tasks, json_path, time.monotonic() - started, stopped)
    summary = json.loads(json_path.read_text())
    log(f"{summary['cells_finished']} of {len(cells)} cells finished, "
        f"{len(summary['groups'])} complete (task, seed) groups; {json_path}")
    for algo, c in summary["ci"].items():
        print(f"{algo:10s} geomean best speedup {c['geomean']:.2f}x "
              f"[{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}] over {c['runs']} runs")
    for pair, c in summary["comparisons"].items():
        print(f"{pair:22s} {c['ratio']:.2f} [{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}] "
              f"({c['pairs']} pairs)")


def write(out: dict, records: dict, tasks: list[str], json_path: Path, wall: float,
          stopped: str | None) -> None:
    """The JSON and its plot, as of now: a killed run leaves what it had."""
    agg = aggregate(records)
    curve = curves(records, tasks)
    finished = sum("error" not in r for r in records.values())
    doc = {**out, "wall_seconds": round(wall, 1), "stopped": stopped,
           "cells_finished": finished, "cells_failed": len(records) - finished,
           **agg, "curves": curve, "runs": records}
    json_path.write_text(json.dumps(doc, indent=1) + "\n")
    plot(curve, json_path.with_suffix(".png"),
         f"best-so-far GFLOP/s, {out['model']} ({out['settings']['evals']} candidates a run)")


if __name__ == "__main__":
    main()
