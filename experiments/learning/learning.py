"""Does GRPO on perfgym's rewards make the default model write faster kernels? An experiment
designed before it runs, against a learning-rate-0 control.

    python experiments/learning/learning.py [--out runs/learning] [--seeds 1,2,3] [--steps 6]
                          [--json experiments/learning/learning.json] [--report-only]

The measure, chosen first: a sample's speedup over the task's naive kernel when it is correct,
0 when it is not (failures at a fixed floor of 0), averaged over the samples of an arm with
every task and seed weighted alike. An arm's gain is its measure over the control's, minus 1
(Table II's "learning gain" of "Improving HPC Code Generation Capability of LLMs via Online RL
with Real-Machine Benchmark Rewards").

Stages, each resumable (rerun the same command after a kill; finished stages are skipped):

1. data: SFT records in the opened form search and GRPO use (perfgym.train.sft_data.
   opened_examples) from the suite's kernels and variants, minus the held-out task;
2. sft: LoRA SFT of the default model on them, merged: the initial policy of both arms;
3. pilot: samples of the initial policy on the training tasks give the measure's mean and
   per-sample standard deviation; the power analysis turns them into the samples per arm that
   see a +16% gain at 95% confidence with 80% power (at least 200, at most --max-samples);
4. grpo: per seed, GRPO with LoRA from the SFT model on the training tasks' opened "improve"
   prompts, generated on the fast engine (one child process per seed);
5. eval: every final policy, generation only, on the fixed prompt set: the training tasks at
   their training size, the same answers at held-out sizes no training step saw, and a
   held-out task. The control is the initial policy: at learning rate 0 (and beta 0) GRPO
   leaves every weight where it was, so its final policy is the SFT model, sampled with the
   same sampler seeds as the trained seeds;
6. report: gains with 95% bootstrap intervals stratified over seeds and samples
   (perfgym.metrics.bootstrap_gain), a table, a plot and the JSON.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

TRAIN_TASKS = ("dot", "dgemv", "prefix_sum", "transpose", "histogram")
HELDOUT_TASK = "spmv"  # a short kernel too; neither SFT nor GRPO sees it
TARGET_GAIN = 0.16  # the smallest gain the paper reports (Table II)
MIN_SAMPLES = 200
HELDOUT_TASK_SAMPLES = 100  # per arm
HELDOUT_SIZE_SAMPLES = 60  # per arm; each is judged at the task's 3 held-out sizes
PILOT_PER_TASK = 16
CHUNK = 16  # samples per prompt per engine call (the KV cache holds 5 x 16 x 900 tokens)
# Evaluation's sampler: the default model's (models.DEFAULT_SAMPLING) with room for the
# training tasks' expert kernels (their bodies are 530-900 characters, about 300 tokens)
EVAL_SAMPLING = {"temperature": 0.3, "top_k": 0, "top_p": 0.95, "min_p": 0.0,
                 "repetition_penalty": 1.0, "max_tokens": 384}
# Kernels run on one thread: on a shared two-core machine a neighbour then costs a kernel its
# cache, not half its threads, and speedups keep their order
EVAL_OVERRIDES = {"threads": 1}
# The measure's evaluations also stop a kernel after 3 s (not 8: a sample that slow is a
# failure either way, and the SFT model's slow prefix sums made timeouts most of the time)
# and time for 0.5 s: both arms alike
MEASURE_OVERRIDES = {**EVAL_OVERRIDES, "timeout": 3.0, "max_time": 0.5}
SFT = {"lora": True, "lora_r": 64, "lora_alpha": 128, "lora_dropout": 0.0,
       "learning_rate": 5e-4, "batch_size": 3, "max_length": 1536, "max_steps": 12,
       "warmup_steps": 0, "bf16": "auto"}
GRPO = {"mode": "fixed", "task": ",".join(TRAIN_TASKS), "prompt_op": "improve",
        "answer_start": True, "engine": "openvino", "fixed_prompts": len(TRAIN_TASKS),
        "G": 4, "groups_per_step": len(TRAIN_TASKS), "learning_rate": 5e-4, "lora": True,
        "lora_r": 16, "lora_alpha": 32, "beta": 0.0, "reward": "tiered",
        "max_completion_length": 384, "temperature": 0.7, "top_p": 0.95,
        "gradient_checkpointing": False, "bf16": "auto", "micro_batch": 2, "save_steps": 2,
        "eval_overrides": EVAL_OVERRIDES}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def eval_config(measure: bool = False):
    from perfgym.config import EvalConfig
    return EvalConfig(**(MEASURE_OVERRIDES if measure else EVAL_OVERRIDES))


def measure(outcome) -> float:
    return float(outcome.speedup or 0.0) if outcome.ok else 0.0


# --- stages -----------------------------------------------------------------------------------

def make_data(out: Path) -> None:
    from perfgym.machine import machine_info
    from perfgym.tasks import builtin_names, get_task
    from perfgym.train.sft_data import opened_examples, write_examples
    tasks = [get_task(n) for n in builtin_names() if n != HELDOUT_TASK]
    records, skipped = opened_examples(tasks, machine_info(), eval_config())
    if not records:
        raise SystemExit("no kernel of the suite verified in the opened form; see "
                         f"{out / 'sft_skipped.json'}")
    (out / "sft_skipped.json").write_text(json.dumps(skipped, indent=1))
    write_examples(out / "sft_data.jsonl", records)
    log(f"SFT data: {len(records)} kernels from {len({r['task'] for r in records})} tasks "
        f"({len(skipped)} left out, see sft_skipped.json)")


def run_sft(out: Path) -> None:
    from perfgym.train.sft import SFTSettings, train
    train(SFTSettings(model_path=None, pairs=str(out / "sft_data.jsonl"),
                      output_dir=str(out / "sft"), **SFT))


def sample(model: Path | str, tasks: list[str], per_task: int, seed: int,
           sampling: dict | None = None, templates: Path | None = None,
           config=None, opened: bool = True) -> list[tuple[str, str]]:
    """(task, answer) pairs: `per_task` answers to each task's improve prompt, opened unless
    `opened` is False, drawn with `sampling` (default EVAL_SAMPLING) from the prompt
    `templates` give (default perfgym's), the prompt built under `config` (default this
    experiment's eval_config)."""
    from perfgym.machine import machine_info
    from perfgym.opening import answer_start, full_answer
    from perfgym.policies.openvino import OpenVINOPolicy
    from perfgym.tasks import get_task
    from perfgym.train.grpo import task_prompt
    policy = OpenVINOPolicy(model, cache_gb=4)
    policy.seed = seed * 1000  # the control and the trained policy of a seed share it
    machine, config = machine_info(), config or eval_config()
    ts = [get_task(n) for n in tasks]
    prompts = [task_prompt(t, "improve", None, machine, config, templates) for t in ts]
    openings = [answer_start(t) if opened else None for t in ts]
    answers: list[tuple[str, str]] = []
    left, started = per_task, time.monotonic()
    while left > 0:  # a line per engine call: a stall shows as the sampling, not the judging
        n = min(CHUNK, left)
        groups = policy.generate(prompts, n, **({"openings": openings} if opened else {}),
                                 **(sampling or EVAL_SAMPLING))
        answers += [(t.name, full_answer(o, c) if o else c)
                    for t, o, g in zip(ts, openings, groups) for c in g]
        left -= n
        log(f"sampled {per_task - left} of {per_task} answers to each of {len(ts)} tasks "
            f"({time.monotonic() - started:.0f} s)")
    policy.engine.close()
    return answers


def judge(answers: list[tuple[str, str]], heldout_sizes: bool = False) -> list[dict]:
    """One record per answer: its status, speedup and measure, at the task's training size or
    folded over its held-out sizes."""
    from perfgym.executors import Request, evaluate_many
    from perfgym.multisize import evaluate_folded
    from perfgym.tasks import get_task
    config = eval_config(measure=True)
    if heldout_sizes:
        judged = []
        for name in dict.fromkeys(n for n, _ in answers):
            task = get_task(name)
            mine = [a for n, a in answers if n == name]
            judged += zip([name] * len(mine), mine,
                          evaluate_folded(task, [(a, config) for a in mine], task.heldout_sizes))
    else:
        outcomes = evaluate_many([Request(get_task(n), a, None, config) for n, a in answers],
                                 progress=True)
        judged = [(n, a, o) for (n, a), o in zip(answers, outcomes)]
    return [{"task": n, "status": o.status.value, "speedup": o.speedup, "measure": measure(o),
             "answer": hashlib.sha256(a.encode()).hexdigest()[:16], "chars": len(a)}
            for n, a, o in judged]


def run_pilot(out: Path, sft_model: Path, seeds: list[int], max_samples: int) -> dict:
    """The pilot's samples (drawn once), and the plan the power analysis makes of them."""
    from perfgym.metrics import detectable_gain, samples_for_power
    path = out / "pilot.json"
    if path.exists():
        records = json.loads(path.read_text())["records"]
    else:
        records = judge(sample(sft_model, list(TRAIN_TASKS), PILOT_PER_TASK, seed=999))
    by_task = {t: [r["measure"] for r in records if r["task"] == t] for t in TRAIN_TASKS}
    mean = statistics.fmean(statistics.fmean(v) for v in by_task.values())
    # within-task spread: with the same samples per task, the tasks' own levels add nothing
    # to the variance of the arm's mean
    sd = math.sqrt(statistics.fmean(statistics.pvariance(v) for v in by_task.values()))
    needed = samples_for_power(mean, sd, TARGET_GAIN) if mean > 0 and sd > 0 else None
    per_arm = max(MIN_SAMPLES, min(needed or max_samples, max_samples))
    cells = len(seeds) * len(TRAIN_TASKS)
    plan = {"pilot_samples": len(records), "pilot_mean": mean, "pilot_sd": sd,
            "pilot_by_task": {t: statistics.fmean(v) for t, v in by_task.items()},
            "samples_needed_for_16pct": needed, "max_samples": max_samples,
            "samples_per_arm": math.ceil(per_arm / cells) * cells,
            "per_cell": math.ceil(per_arm / cells),
            "heldout_task_per_seed": math.ceil(HELDOUT_TASK_SAMPLES / len(seeds)),
            "heldout_sizes_per_cell": math.ceil(HELDOUT_SIZE_SAMPLES / cells),
            "records": records}
    plan["detectable_gain"] = (detectable_gain(mean, sd, plan["samples_per_arm"])
                               if mean > 0 else None)
    path.write_text(json.dumps(plan, indent=1))
    return plan


def grpo_settings(out: Path, sft_model: Path, seed: int, steps: int):
    from perfgym.train import grpo, recipes
    values = dict(GRPO, steps=steps, model_path=str(sft_model), seed=seed,
                  output_dir=str(out / f"seed{seed}"))
    return recipes._settings(grpo.GRPOSettings, values, "grpo")


def run_arm(out: Path, sft_model: Path, seed: int, steps: int) -> None:
    from perfgym.train import grpo
    grpo.train(grpo_settings(out, sft_model, seed, steps), resume=True)
    (out / f"seed{seed}" / "done").write_text("ok\n")


def run_eval(out: Path, model: Path, arm: str, seed: int, plan: dict) -> None:
    """One arm's samples for one seed: the training tasks, the held-out sizes, the held-out
    task; written as one JSON file (the stage's resume point)."""
    path = out / "eval" / f"{arm}_seed{seed}.json"
    if path.exists():
        return
    answers = sample(model, list(TRAIN_TASKS), plan["per_cell"], seed)
    other = sample(model, [HELDOUT_TASK], plan["heldout_task_per_seed"], seed)
    k = plan["heldout_sizes_per_cell"]
    resized = [a for t in TRAIN_TASKS for a in [x for x in answers if x[0] == t][:k]]
    result = {"arm": arm, "seed": seed, "model": str(model),
              "train": judge(answers), "heldout_task": judge(other),
              "heldout_sizes": judge(resized, heldout_sizes=True)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))


# --- report -----------------------------------------------------------------------------------

def cells(out: Path, arm: str, seeds: list[int], split: str) -> dict:
    found = {}
    for s in seeds:
        path = out / "eval" / f"{arm}_seed{s}.json"
        if path.exists():
            for r in json.loads(path.read_text())[split]:
                found.setdefault((s, r["task"]), []).append(r["measure"])
    return found


def training_series(out: Path, seed: int) -> list[dict]:
    path = out / f"seed{seed}" / "train_log.jsonl"
    if not path.exists():
        return []
    by_step = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "loss" in row or "reward" in row:
            by_step[row["step"]] = row
    return [by_step[k] for k in sorted(by_step)]


def diagnosis(out: Path, seeds: list[int]) -> dict:
    """What moved: per arm the status mix, the share of distinct answers and of answers that
    beat the naive kernel; per seed the training logs' entropy, gradient norm and reward,
    first steps against last."""
    result = {}
    for arm in ("control", "trained"):
        rows = [r for s in seeds if (out / "eval" / f"{arm}_seed{s}.json").exists()
                for r in json.loads((out / "eval" / f"{arm}_seed{s}.json").read_text())["train"]]
        if not rows:
            continue
        statuses = {}
        for r in rows:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        result[arm] = {"samples": len(rows),
                       "statuses": {k: v / len(rows) for k, v in sorted(statuses.items())},
                       "distinct": len({r["answer"] for r in rows}) / len(rows),
                       # which kernels it moved toward: faster than the naive kernel, at
                       # its speed (a copy or a near copy measures 0.9-1.1x), or slower
                       "faster_than_naive": sum(r["measure"] >= 1.1 for r in rows) / len(rows),
                       "at_naive_speed": sum(0.9 <= r["measure"] < 1.1 for r in rows)
                       / len(rows),
                       "correct_but_slower": sum(0 < r["measure"] < 0.9 for r in rows)
                       / len(rows),
                       "best_speedup": max(r["measure"] for r in rows),
                       "mean_chars": statistics.fmean(r["chars"] for r in rows),
                       "by_task": {t: statistics.fmean(r["measure"] for r in rows
                                                       if r["task"] == t) for t in TRAIN_TASKS}}
    per_seed = {}
    for s in seeds:
        series = training_series(out, s)
        if len(series) < 2:
            continue
        k = max(1, len(series) // 4)

        def avg(key, part):
            vals = [r[key] for r in part if isinstance(r.get(key), (int, float))]
            return statistics.fmean(vals) if vals else None
        per_seed[s] = {f"{which}_{key}": avg(key, part)
                       for which, part in (("first", series[:k]), ("last", series[-k:]))
                       for key in ("reward", "reward_std", "entropy", "grad_norm")}
        per_seed[s]["steps"] = len(series)
    result["training"] = per_seed
    return result


def _pct(x: float) -> str:
    return "unbounded" if x == math.inf else f"{x:+.1%}"


def _finite(x):
    return None if x is None or not math.isfinite(x) else x


def report(out: Path, seeds: list[int], plan: dict, wall: float, json_path: Path | None) -> str:
    from perfgym.metrics import arm_mean, bootstrap
    rows, numbers = [], {}
    for split, label in (("train", "training tasks, training size"),
                         ("heldout_sizes", "training tasks, held-out sizes"),
                         ("heldout_task", f"held-out task ({HELDOUT_TASK})")):
        trained, control = cells(out, "trained", seeds, split), cells(out, "control", seeds,
                                                                      split)
        common = sorted(set(trained) & set(control))
        if not common:
            continue
        trained = {k: trained[k] for k in common}
        control = {k: control[k] for k in common}
        b = bootstrap(trained, control)
        per_seed = {}
        for s in sorted({s for s, _ in common}):
            t = arm_mean({k: v for k, v in trained.items() if k[0] == s})
            c = arm_mean({k: v for k, v in control.items() if k[0] == s})
            per_seed[s] = t / c - 1 if c > 0 else math.inf
        numbers[split] = {"control": arm_mean(control), "trained": arm_mean(trained), **b,
                          "per_seed": per_seed,
                          "samples_per_arm": sum(map(len, trained.values()))}
        rows.append(f"| {label} | {numbers[split]['samples_per_arm']} | "
                    f"{numbers[split]['control']:.3f} | {numbers[split]['trained']:.3f} | "
                    f"{_pct(b['gain'])} | [{_pct(b['gain_low'])}, {_pct(b['gain_high'])}] | "
                    f"{b['diff']:+.3f} [{b['diff_low']:+.3f}, {b['diff_high']:+.3f}] | "
                    f"{', '.join(_pct(g) for g in per_seed.values())} |")
    text = ["| prompts | samples per arm | LR=0 control (initial) | GRPO (final) | learning "
            "gain | 95% CI | difference [95% CI] | gain per seed |",
            "|---|---|---|---|---|---|---|---|", *rows]
    detect = plan.get("detectable_gain")
    text.append(f"\nMeasure: speedup over the naive kernel per sample, failures 0. Pilot: mean "
                f"{plan['pilot_mean']:.3f}, per-sample SD {plan['pilot_sd']:.3f} over "
                f"{plan['pilot_samples']} samples; +{TARGET_GAIN:.0%} at 95% confidence and "
                f"80% power needs {plan['samples_needed_for_16pct']} samples per arm; this run "
                f"took {plan['samples_per_arm']} (the gain it sees with 80% power: "
                f"{'-' if detect is None else f'{detect:+.0%}'}). Seeds {seeds}; wall time "
                f"{wall / 60:.0f} min.")
    diag = diagnosis(out, seeds)
    (out / "table.md").write_text("\n".join(text) + "\n")
    if "train" in numbers:
        plot(out, seeds, numbers)
    if json_path is not None and "train" in numbers:
        tr = numbers["train"]
        held = numbers.get("heldout_task", {})
        sizes = numbers.get("heldout_sizes", {})
        result = {
            "measure": "speedup over the task's naive kernel per sample, failures 0; mean over "
                       "tasks of the mean over seeds; gain = trained / control - 1 (null: "
                       "unbounded, a control of 0)",
            "seeds": len(seeds), "seed_values": seeds,
            "samples_per_arm": tr["samples_per_arm"],
            "gain_mean": _finite(tr["gain"]), "gain_ci_low": _finite(tr["gain_low"]),
            "gain_ci_high": _finite(tr["gain_high"]),
            "heldout_gain_mean": _finite(held.get("gain")),
            "heldout_gain_ci_low": _finite(held.get("gain_low")),
            "heldout_gain_ci_high": _finite(held.get("gain_high")), "heldout_task": HELDOUT_TASK,
            "heldout_sizes_gain_mean": _finite(sizes.get("gain")),
            "heldout_sizes_gain_ci_low": _finite(sizes.get("gain_low")),
            "heldout_sizes_gain_ci_high": _finite(sizes.get("gain_high")),
            "wall_seconds": round(wall),
            "splits": {k: {kk: (_finite(vv) if isinstance(vv, float) else vv)
                           for kk, vv in v.items() if kk != "per_seed"} |
                       {"per_seed": {s: _finite(g) for s, g in v["per_seed"].items()}}
                       for k, v in numbers.items()},
            "plan": {k: v for k, v in plan.items() if k != "records"},
            "diagnosis": diag, "train_tasks": list(TRAIN_TASKS),
            "settings": {"sft": SFT, "grpo": dict(GRPO), "eval_sampling": EVAL_SAMPLING,
                         "measure_overrides": MEASURE_OVERRIDES}}
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return "\n".join(text) + "\n\n" + json.dumps(diag, indent=1)


def plot(out: Path, seeds: list[int], numbers: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    names = list(numbers)
    # the difference in the measure (always defined, unlike a gain over a control of 0)
    diffs = [numbers[n]["diff"] for n in names]
    errs = [[d - numbers[n]["diff_low"] for n, d in zip(names, diffs)],
            [numbers[n]["diff_high"] - d for n, d in zip(names, diffs)]]
    left.bar(range(len(names)), diffs, yerr=errs, capsize=6, color="tab:blue")
    left.axhline(0, color="black", lw=0.8)
    left.set_xticks(range(len(names)), [n.replace("_", " ") for n in names])
    left.set_ylabel("GRPO minus LR=0: speedup per sample (95% CI)")
    for s in seeds:
        series = training_series(out, s)
        right.plot([r["step"] for r in series], [r.get("reward") for r in series],
                   label=f"seed {s}")
    right.set_xlabel("GRPO step")
    right.set_ylabel("mean reward of the step's samples")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "learning.png", dpi=110)


# --- driver -----------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/learning")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--steps", type=int, default=6, help="GRPO steps per seed")
    ap.add_argument("--max-samples", type=int, default=210,
                    help="cap on the samples per arm the power analysis may ask for (the "
                    "time budget: about 200 fit in two hours on two cores)")
    ap.add_argument("--json", default=None, help="write the results here too")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--arm", type=int, help=argparse.SUPPRESS)  # a child: one GRPO seed
    ap.add_argument("--eval", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        print(f"--seeds takes comma-separated integers, got {args.seeds!r}", file=sys.stderr)
        sys.exit(2)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sft_model = out / "sft" / "merged"

    if args.arm is not None:
        run_arm(out, sft_model, args.arm, args.steps)
        return
    if args.eval:
        arm, seed = args.eval[0], int(args.eval[1])
        model = sft_model if arm == "control" else out / f"seed{seed}" / "final"
        run_eval(out, model, arm, seed, json.loads((out / "pilot.json").read_text()))
        return

    started = time.monotonic()
    wall_file = out / "wall.json"
    before = json.loads(wall_file.read_text())["seconds"] if wall_file.exists() else 0.0

    def spent() -> float:
        return before + time.monotonic() - started

    def child(*extra: str) -> None:
        subprocess.run([sys.executable, __file__, "--out", str(out), "--seeds", args.seeds,
                        "--steps", str(args.steps), *extra], check=True)
        wall_file.write_text(json.dumps({"seconds": spent()}))

    if not args.report_only:
        if not (out / "sft_data.jsonl").exists():
            log("SFT data: the suite's kernels in the opened form, minus " + HELDOUT_TASK)
            make_data(out)
        if not (sft_model / "config.json").exists():
            log("SFT (LoRA) of the default model")
            run_sft(out)
        wall_file.write_text(json.dumps({"seconds": spent()}))
        log("pilot and power analysis")
        plan = run_pilot(out, sft_model, seeds, args.max_samples)
        log(f"pilot: mean {plan['pilot_mean']:.3f}, SD {plan['pilot_sd']:.3f}; +16% needs "
            f"{plan['samples_needed_for_16pct']} samples per arm; taking "
            f"{plan['samples_per_arm']} ({plan['per_cell']} per seed and task)")
        for seed in seeds:
            if not (out / f"seed{seed}" / "done").exists():
                log(f"GRPO, seed {seed} ({args.steps} steps)")
                child("--arm", str(seed))
        for seed in seeds:
            for arm in ("control", "trained"):
                if not (out / "eval" / f"{arm}_seed{seed}.json").exists():
                    log(f"evaluating {arm}, seed {seed}")
                    child("--eval", arm, str(seed))
    plan = json.loads((out / "pilot.json").read_text())
    text = report(out, seeds, plan, spent(), Path(args.json) if args.json else None)
    wall_file.write_text(json.dumps({"seconds": spent()}))
    print(text)


if __name__ == "__main__":
    main()
