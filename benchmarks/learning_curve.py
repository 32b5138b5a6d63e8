"""Does GRPO on perfgym's rewards teach the real model anything? A learning curve with a control.

    python benchmarks/learning_curve.py [--recipe cpu_learning_curve] [--out runs/learning_curve]
                                        [--steps N] [--seeds 1,2] [--report-only]

1. SFT examples from the task's verified kernels, in the form GRPO asks (the recipe's [data]);
2. SFT with LoRA on the default model (SmolLM2-135M-Instruct), once;
3. for each seed, GRPO from the SFT model twice: at the recipe's learning rate and at learning
   rate 0 (the control: same seeds, prompts and sampling, no update), each arm in its own
   process (a 135M model under TRL holds several GB);
4. the table in the form of "Improving HPC Code Generation Capability of LLMs via Online RL
   with Real-Machine Benchmark Rewards" (Table II: initial, final, learning gain over the
   control) with the spread over seeds, and a plot of both arms.

Every stage is resumable: rerun the same command after a kill and finished stages are skipped,
a GRPO arm continues from its last checkpoint. Per step, each arm's run store holds a
`grpo_step` event (mean reward, share above the floor, status mix, best/median GFLOP/s) and
TensorBoard logs are under its checkpoints directory.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

MEASURES = ("mean_gflops", "mean_reward", "above_floor", "max_gflops")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def arm_dir(out: Path, seed: int, control: bool) -> Path:
    return out / f"seed{seed}" / ("control" if control else "trained")


def run_arm(recipe_path: str, out: Path, model: str, seed: int, control: bool,
            steps: int | None) -> None:
    """One GRPO arm, in this process (called in a child of the driver)."""
    from perfgym.train import grpo, recipes
    recipe = recipes.load(recipe_path)
    values = dict(recipe["grpo"])
    if steps:
        values["steps"] = steps
    values.update(model_path=model, output_dir=str(arm_dir(out, seed, control)), seed=seed)
    if control:
        values["learning_rate"] = recipe.get("curve", {}).get("control_learning_rate", 0.0)
    settings = recipes._settings(grpo.GRPOSettings, values, "grpo")
    grpo.train(settings, resume=True)
    (arm_dir(out, seed, control) / "done").write_text("ok\n")


def base_samples(recipe_path: str, out: Path, model: str, n: int) -> None:
    """The floor before any training: n samples from the untouched model, same prompt."""
    from perfgym.config import EvalConfig
    from perfgym.executors import Request, evaluate_many
    from perfgym.machine import machine_info
    from perfgym.policies.hf import HFPolicy
    from perfgym.prompts import generate_prompt
    from perfgym.tasks import get_task
    from perfgym.train import recipes
    from perfgym.train.grpo import step_stats
    from perfgym.rewards import score
    g = recipes.load(recipe_path)["grpo"]
    task = get_task(g.get("task", "dgemm"))
    config = EvalConfig(**g.get("eval_overrides", {}))
    prompt = generate_prompt(task, None, machine_info(), config=config)
    policy = HFPolicy(model, batch_size=4)
    texts = policy.generate([prompt], n, max_tokens=g.get("max_completion_length", 448),
                            temperature=g.get("temperature", 1.0))[0]
    outcomes = evaluate_many([Request(task, t, None, config) for t in texts])
    stats = step_stats(0, outcomes, score(g.get("reward", "tiered"), outcomes))
    (out / "base_samples.json").write_text(json.dumps({"stats": stats, "texts": texts}, indent=1))


def step_series(run: Path) -> list[dict]:
    """The last `grpo_step` event of every step (a resumed step may have logged twice)."""
    from perfgym.store import RunStore
    if not RunStore.exists(run):
        return []
    store = RunStore(run)
    by_step = {d["step"]: d for _, _, d in store.events("grpo_step")}
    store.close()
    return [by_step[k] for k in sorted(by_step)]


def summarize(out: Path, seeds: list[int], last_k: int) -> dict:
    rows = {}
    for seed in seeds:
        for control in (False, True):
            series = step_series(arm_dir(out, seed, control))
            if not series:
                continue
            def mean(key, part):
                vals = [s[key] or 0.0 for s in part]
                return statistics.fmean(vals) if vals else None
            rows[(seed, control)] = {
                "steps": len(series),
                **{f"initial_{m}": mean(m, series[:last_k]) for m in MEASURES},
                **{f"final_{m}": mean(m, series[-last_k:]) for m in MEASURES},
                "best_gflops": max((s["max_gflops"] or 0.0) for s in series),
                "series": series}
    return rows


def table(rows: dict, seeds: list[int], last_k: int) -> str:
    lines = [f"| seed | arm | steps | initial GFLOP/s per sample | final (mean of last {last_k}) "
             "| best GFLOP/s | share above floor (final) | mean reward (final) | learning gain |",
             "|---|---|---|---|---|---|---|---|---|"]
    gains = []
    for seed in seeds:
        ctl = rows.get((seed, True))
        for control in (True, False):
            r = rows.get((seed, control))
            if r is None:
                continue
            gain = ""
            if not control and ctl and ctl["final_mean_gflops"]:
                g = r["final_mean_gflops"] / ctl["final_mean_gflops"] - 1
                gains.append(g)
                gain = f"{g:+.0%}"
            lines.append(f"| {seed} | {'LR=0 (control)' if control else 'trained'} | "
                         f"{r['steps']} | {r['initial_mean_gflops']:.2f} | "
                         f"{r['final_mean_gflops']:.2f} | {r['best_gflops']:.2f} | "
                         f"{r['final_above_floor']:.0%} | {r['final_mean_reward']:.1f} | {gain} |")
    if gains:
        spread = (f"{min(gains):+.0%} to {max(gains):+.0%}" if len(gains) > 1 else "one seed")
        lines.append(f"\nLearning gain (final GFLOP/s per sample, trained over control, same "
                     f"seed): mean {statistics.fmean(gains):+.0%}, range {spread} over "
                     f"{len(gains)} seed(s).")
    return "\n".join(lines)


def plot(rows: dict, seeds: list[int], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, key, title in zip(axes, ("mean_gflops", "above_floor", "mean_reward"),
                              ("GFLOP/s per sample (failures 0)", "share above the floor",
                               "mean reward")):
        for control, color in ((False, "tab:blue"), (True, "tab:gray")):
            per_seed = [[s[key] or 0.0 for s in rows[(seed, control)]["series"]]
                        for seed in seeds if (seed, control) in rows]
            if not per_seed:
                continue
            n = min(map(len, per_seed))
            steps = list(range(n))
            mean = [statistics.fmean(p[i] for p in per_seed) for i in steps]
            lo = [min(p[i] for p in per_seed) for i in steps]
            hi = [max(p[i] for p in per_seed) for i in steps]
            label = "LR=0 (control)" if control else "trained"
            ax.plot(steps, mean, color=color, label=f"{label}, mean of {len(per_seed)} seeds")
            ax.fill_between(steps, lo, hi, color=color, alpha=0.2)
        ax.set_title(title)
        ax.set_xlabel("GRPO step")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="cpu_learning_curve")
    ap.add_argument("--out", default="runs/learning_curve")
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps per arm (recipe's)")
    ap.add_argument("--seeds", default=None, help="comma-separated (recipe's [curve] seeds)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--arm", nargs=2, type=int, metavar=("SEED", "CONTROL"),
                    help=argparse.SUPPRESS)  # the driver's child processes
    ap.add_argument("--base", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    from perfgym.train import recipes
    recipe_path = str(recipes.resolve(args.recipe))
    recipe = recipes.load(recipe_path)
    curve = recipe.get("curve", {})
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else curve.get("seeds", [1, 2])
    last_k = curve.get("last_k", 4)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sft_model = out / "sft" / "merged"

    if args.arm:
        run_arm(recipe_path, out, str(sft_model), args.arm[0], bool(args.arm[1]), args.steps)
        return
    if args.base:
        from perfgym.models import resolve_model
        base_samples(recipe_path, out, str(resolve_model()), curve.get("base_samples", 8))
        return

    started = time.monotonic()
    child = [sys.executable, __file__, "--recipe", recipe_path, "--out", str(out)]
    if args.steps:
        child += ["--steps", str(args.steps)]
    if not args.report_only:
        if not (out / "base_samples.json").exists() and curve.get("base_samples", 0):
            log("sampling the untouched model (the floor before training)")
            subprocess.run(child + ["--base"], check=True)
        if not (sft_model / "config.json").exists():
            log("SFT examples and SFT")
            recipes.run(recipe_path, None, out, stages=("data", "sft"))
        for seed in seeds:
            for control in (False, True):
                if (arm_dir(out, seed, control) / "done").exists():
                    continue
                log(f"GRPO seed {seed} {'control (LR=0)' if control else 'trained'}")
                subprocess.run(child + ["--arm", str(seed), str(int(control))], check=True)
    rows = summarize(out, seeds, last_k)
    text = table(rows, seeds, last_k)
    base = out / "base_samples.json"
    if base.exists():
        b = json.loads(base.read_text())["stats"]
        text = (f"Before SFT: {b['above_floor']:.0%} of {b['completions']} samples above the "
                f"floor ({b['statuses']}).\n\n" + text)
    sft_rows = [rows[(s, True)]["series"] for s in seeds if (s, True) in rows]
    if sft_rows:
        floor = statistics.fmean(st["above_floor"] for series in sft_rows for st in series)
        n = sum(st["completions"] for series in sft_rows for st in series)
        text = (f"After SFT, before GRPO (every control-arm sample): {floor:.0%} of {n} samples "
                f"above the floor.\n" + text)
    (out / "table.md").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps(
        {f"seed{s}_{'control' if c else 'trained'}": r for (s, c), r in rows.items()},
        indent=1, default=str))
    if rows:
        plot(rows, seeds, out / "learning_curve.png")
    print(text)
    print(f"\n(wall time of this invocation: {time.monotonic() - started:.0f} s; "
          f"outputs in {out})")


if __name__ == "__main__":
    main()
