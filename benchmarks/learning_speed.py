"""Does the small model learn to write faster kernels from the coder's verified kernels, and
does GRPO on a reward that pays only speed add to it? An experiment designed before it runs.

    python benchmarks/teacher_data.py                    (first: the coder's pairs)
    python benchmarks/learning_speed.py [--out runs/learning_speed] [--seeds 1,2,3]
                                        [--steps 4] [--json benchmarks/results/learning_speed.json]

The measures, chosen first (per sample, on the learning experiment's prompts: the improve
prompt of each training task's naive kernel, opened answers, T=0.3):
- primary: the share of samples faster than the naive kernel, "faster" as the speed reward
  pays it: correct, faster by the evaluator's bound where it gives one, and >= 1.1x (the
  noise band of one C evaluation's median);
- secondary: the mean of ln(speedup) with failures at ln(0.1) (correct kernels floored there).
Each arm's figure is the mean over tasks of the mean over seeds (metrics.arm_mean), its 95%
interval a percentile bootstrap stratified over seeds and samples (metrics.bootstrap).

Arms (the student is the default model, SmolLM2-135M-Instruct):
- base: the untouched model;
- control: the SFT model, which is also the learning-rate-0 control: GRPO at LR 0 and beta 0
  leaves every weight where SFT put it. It is sampled with the GRPO seeds' sampler seeds;
- grpo: SFT, then GRPO with the speed reward (rewards.speed), one run per seed;
- teacher: the coder (Qwen2.5-Coder-1.5B) on the same prompts, one seed: the ceiling.

Splits: the training tasks at their training size (`train`), the same answers judged at the
tasks' held-out sizes (`heldout_sizes`), and a task no stage saw (`heldout_task`, spmv).

Stages, each resumable (rerun after a kill; what is done is skipped, and `wall.json` keeps
each stage's seconds):
1. data: the teacher's pairs (runs/teacher/pairs.jsonl) as opened SFT records: the improve
   prompt of the task's naive kernel, perfgym's opening and the fast kernel's body, kept when
   the joined answer is OK and >= 1.1x naive (sft_data.opened_examples' rule);
2. sft: LoRA SFT of the default model on them, merged;
3. pilot: the base model's samples on the training tasks give the share faster p0; the power
   analysis (two proportions, 95% two-sided, 80% power) gives the samples per arm that tell
   the goal's 20% from p0; at least 200;
4. grpo: per seed, GRPO from the SFT model with the speed reward;
5. eval: every arm and seed, generation only; every sample's record is stored;
6. report: `per_sample` records, `ci[arm]`, the comparisons with their intervals, the pilot
   and the stages' wall seconds, in the results JSON.
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
sys.path.insert(0, str(Path(__file__).parent))

import learning  # noqa: E402  (the learning experiment: prompts, sampler, SFT settings)

TRAIN_TASKS = learning.TRAIN_TASKS
HELDOUT_TASK = learning.HELDOUT_TASK
GOAL_SHARE = 0.20  # the goal for the student's share faster on the training tasks
MIN_SAMPLES = 200
FAILURE_LOG = math.log(0.1)
TEACHER_PER_TASK = 6  # the coder costs ~20x the student per token: a ceiling, not an arm
# Kernels run on every core (the learning experiment ran them on one): the coder's speedups
# are OpenMP's, and on one thread none of its answers to dot, prefix_sum, transpose and
# histogram beat the naive kernel. GRPO's evaluation runs while its trainer waits.
MEASURE_OVERRIDES = {"timeout": 3.0, "max_time": 0.5}
# the speed reward; micro-batches of one group, so the shared-prefix update computes each
# prompt once (benchmarks/update_speed.py)
GRPO = {**learning.GRPO, "reward": "speed", "micro_batch": 4, "eval_overrides": {}}
SFT = dict(learning.SFT)


def eval_config(measure: bool = False):
    from perfgym.config import EvalConfig
    return EvalConfig(**(MEASURE_OVERRIDES if measure else {}))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def is_faster(o) -> bool:
    from perfgym.rewards import SPEED_BAND, faster
    return bool(o.ok and o.speedup and faster(o) and o.speedup >= SPEED_BAND
                and "baseline_copy" not in o.flags)


def log_speedup(o) -> float:
    return math.log(max(o.speedup, 0.1)) if o.ok and o.speedup else FAILURE_LOG


# --- stages -----------------------------------------------------------------------------------

def make_data(out: Path, pairs_file: Path) -> None:
    """Opened SFT records from the teacher's pairs (their fast kernels), verified again."""
    from perfgym.executors import Request, evaluate_many
    from perfgym.machine import machine_info
    from perfgym.opening import answer_start
    from perfgym.tasks import get_task
    from perfgym.train.grpo import task_prompt
    from perfgym.train.pairs import read_pairs
    from perfgym.train.sft_data import opened_body, write_examples
    pairs = [p for p in read_pairs(pairs_file) if p.task and p.task != HELDOUT_TASK]
    machine, config = machine_info(), eval_config()
    todo, skipped = [], {}
    for p in pairs:
        task = get_task(p.task)
        body = opened_body(task, p.fast)
        if body is None:
            skipped[p.file_id] = "not the shape of an opened answer"
            continue
        todo.append((task, p, answer_start(task) + body))
    outcomes = evaluate_many([Request(t, a, None, config) for t, _, a in todo], progress=True)
    records = []
    for (task, p, joined), o in zip(todo, outcomes):
        if not is_faster(o):
            skipped[p.file_id] = f"{o.status.value}, {o.speedup or 0:.2f}x here"
            continue
        records.append({"prompt": [{"role": "user", "content": task_prompt(
                            task, "improve", None, machine, config)}],
                        "completion": [{"role": "assistant", "content": joined + "\n```"}],
                        "task": task.name, "kernel": p.file_id, "speedup": o.speedup})
    if not records:
        raise SystemExit(f"none of the {len(pairs)} teacher pairs verified faster in the opened "
                         f"form; see {out / 'sft_skipped.json'}")
    (out / "sft_skipped.json").write_text(json.dumps(skipped, indent=1))
    write_examples(out / "sft_data.jsonl", records)
    log(f"SFT data: {len(records)} kernels of {len({r['task'] for r in records})} tasks from "
        f"{len(pairs)} pairs ({len(skipped)} left out, see sft_skipped.json)")


def run_sft(out: Path, records: int) -> None:
    from perfgym.train.sft import SFTSettings, train
    # two passes over the teacher's kernels (12 steps of 3 took the suite's 36 in one)
    steps = max(6, math.ceil(2 * records / SFT["batch_size"]))
    train(SFTSettings(model_path=None, pairs=str(out / "sft_data.jsonl"),
                      output_dir=str(out / "sft"), **{**SFT, "max_steps": steps}))


def judge(answers: list[tuple[str, str]], split: str) -> list[dict]:
    """One record per answer (split heldout_sizes: folded over the task's held-out sizes)."""
    from perfgym.executors import Request, evaluate_many
    from perfgym.multisize import evaluate_folded
    from perfgym.tasks import format_size, get_task
    config = eval_config(measure=True)
    if split == "heldout_sizes":
        judged = []
        for name in dict.fromkeys(n for n, _ in answers):
            task = get_task(name)
            mine = [a for n, a in answers if n == name]
            judged += zip([name] * len(mine), mine,
                          evaluate_folded(task, [(a, config) for a in mine], task.heldout_sizes))
        sizes = {n: "+".join(format_size(s) for s in get_task(n).heldout_sizes)
                 for n, _ in answers}
    else:
        outcomes = evaluate_many([Request(get_task(n), a, None, config) for n, a in answers],
                                 progress=True)
        judged = [(n, a, o) for (n, a), o in zip(answers, outcomes)]
        sizes = {n: format_size(get_task(n).default_size) for n, _ in answers}
    return [{"split": split, "task": n, "size": sizes[n], "status": o.status.value,
             "speedup": o.speedup, "faster": is_faster(o), "log_speedup": log_speedup(o),
             "answer_sha256": hashlib.sha256(a.encode()).hexdigest()}
            for n, a, o in judged]


def run_pilot(out: Path, seeds: list[int], max_samples: int) -> dict:
    """The base model's share faster on the training tasks, and the samples per arm that
    tell GOAL_SHARE from it (two proportions, 95% two-sided, 80% power)."""
    from statistics import NormalDist
    path = out / "pilot.json"
    if path.exists():
        return json.loads(path.read_text())
    records = judge(learning.sample(base_model(), list(TRAIN_TASKS), learning.PILOT_PER_TASK,
                                    seed=999), "train")
    p0 = sum(r["faster"] for r in records) / len(records)
    logs = [r["log_speedup"] for r in records]
    z_a, z_b = NormalDist().inv_cdf(0.975), NormalDist().inv_cdf(0.8)
    p1, pbar = GOAL_SHARE, (GOAL_SHARE + p0) / 2
    needed = math.ceil((z_a * math.sqrt(2 * pbar * (1 - pbar))
                        + z_b * math.sqrt(p0 * (1 - p0) + p1 * (1 - p1))) ** 2 / (p1 - p0) ** 2)
    per_arm = max(MIN_SAMPLES, min(needed, max_samples))
    cells = len(seeds) * len(TRAIN_TASKS)
    plan = {"pilot_samples": len(records), "pilot_share_faster": p0,
            "pilot_mean_log_speedup": statistics.fmean(logs),
            "pilot_sd_log_speedup": statistics.pstdev(logs),
            "samples_needed_for_goal": needed, "goal_share": GOAL_SHARE,
            "per_cell": math.ceil(per_arm / cells),
            "samples_per_arm": math.ceil(per_arm / cells) * cells,
            "heldout_task_per_seed": math.ceil(learning.HELDOUT_TASK_SAMPLES / len(seeds)),
            "heldout_sizes_per_cell": math.ceil(learning.HELDOUT_SIZE_SAMPLES / cells),
            "records": records}
    path.write_text(json.dumps(plan, indent=1))
    return plan


def base_model() -> Path:
    from perfgym.models import resolve_model
    return resolve_model(None)


def run_grpo(out: Path, seed: int, steps: int) -> None:
    from perfgym.train import grpo, recipes
    values = dict(GRPO, steps=steps, model_path=str(out / "sft" / "merged"), seed=seed,
                  output_dir=str(out / f"seed{seed}"))
    grpo.train(recipes._settings(grpo.GRPOSettings, values, "grpo"), resume=True)
    (out / f"seed{seed}" / "done").write_text("ok\n")


def run_eval(out: Path, arm: str, seed: int, plan: dict) -> None:
    """One arm's samples for one seed, every split, as one file (the stage's resume point)."""
    path = out / "eval" / f"{arm}_seed{seed}.json"
    if path.exists():
        return
    model = {"base": base_model(), "control": out / "sft" / "merged",
             "grpo": out / f"seed{seed}" / "final", "teacher": "coder"}[arm]
    per_cell = TEACHER_PER_TASK if arm == "teacher" else plan["per_cell"]
    held = TEACHER_PER_TASK if arm == "teacher" else plan["heldout_task_per_seed"]
    answers = learning.sample(model, list(TRAIN_TASKS), per_cell, seed)
    other = learning.sample(model, [HELDOUT_TASK], held, seed)
    k = min(per_cell, plan["heldout_sizes_per_cell"])
    resized = [a for t in TRAIN_TASKS for a in [x for x in answers if x[0] == t][:k]]
    records = judge(answers, "train") + judge(resized, "heldout_sizes") + \
        judge(other, "heldout_task")
    for r in records:
        r.update(arm=arm, seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"arm": arm, "seed": seed, "model": str(model),
                                "records": records}))


# --- report -----------------------------------------------------------------------------------

def per_sample(out: Path) -> list[dict]:
    rows = []
    for path in sorted((out / "eval").glob("*.json")):
        rows += json.loads(path.read_text())["records"]
    return rows


def cells_of(rows: list[dict], arm: str, split: str, key: str) -> dict:
    found: dict = {}
    for r in rows:
        if r["arm"] == arm and r["split"] == split:
            found.setdefault((r["seed"], r["task"]), []).append(float(r[key]))
    return found


def interval(cells: dict, reps: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): metrics.arm_mean and its 95% percentile bootstrap, stratified as
    metrics.bootstrap draws it (seeds, then samples within each cell)."""
    import numpy as np

    from perfgym.metrics import arm_mean
    rng = np.random.default_rng(seed)
    seeds = sorted({s for s, _ in cells})
    tasks = sorted({t for _, t in cells})
    arrays = {k: np.asarray(v) for k, v in cells.items()}
    means = []
    for _ in range(reps):
        drawn = rng.choice(seeds, size=len(seeds), replace=True)
        means.append(np.mean([np.mean([arrays[(s, t)][rng.integers(0, len(arrays[(s, t)]),
                                                                  len(arrays[(s, t)]))].mean()
                                        for s in drawn]) for t in tasks]))
    low, high = np.quantile(means, [0.025, 0.975])
    return arm_mean(cells), float(low), float(high)


def report(out: Path, plan: dict, wall: dict, json_path: Path | None) -> str:
    from perfgym.metrics import bootstrap
    rows = per_sample(out)
    arms = [a for a in ("base", "control", "grpo", "teacher") if any(r["arm"] == a
                                                                      for r in rows)]
    ci: dict = {}
    for arm in arms:
        ci[arm] = {}
        for split in ("train", "heldout_sizes", "heldout_task"):
            faster = cells_of(rows, arm, split, "faster")
            if not faster:
                continue
            f, fl, fh = interval(faster)
            m, ml, mh = interval(cells_of(rows, arm, split, "log_speedup"))
            entry = {"samples": sum(map(len, faster.values())), "faster": f,
                     "faster_low": fl, "faster_high": fh, "mean_log_speedup": m,
                     "mean_log_speedup_low": ml, "mean_log_speedup_high": mh}
            if split == "train":
                ci[arm].update(entry)
            ci[arm][split] = entry
    comparisons = {}
    for a, b in (("grpo", "control"), ("grpo", "base"), ("control", "base")):
        for split in ("train", "heldout_sizes", "heldout_task"):
            x, y = cells_of(rows, a, split, "faster"), cells_of(rows, b, split, "faster")
            common = sorted(set(x) & set(y))
            if common:
                d = bootstrap({k: x[k] for k in common}, {k: y[k] for k in common})
                comparisons[f"{a}-{b}:{split}"] = {"diff": d["diff"], "low": d["diff_low"],
                                                   "high": d["diff_high"]}
    label = {"base": "base model", "control": "SFT on the coder's pairs (= LR-0 control)",
             "grpo": "SFT, then GRPO (speed reward)", "teacher": "teacher (the coder)"}
    lines = ["| arm | samples | faster than naive, training tasks [95% CI] | held-out sizes | "
             f"held-out task ({HELDOUT_TASK}) | mean ln speedup (failures ln 0.1) |",
             "|---|---|---|---|---|---|"]
    for arm in arms:
        c = ci[arm]

        def share(split):
            e = c.get(split)
            return "-" if not e else f"{e['faster']:.1%} [{e['faster_low']:.1%}, " \
                                     f"{e['faster_high']:.1%}]"
        lines.append(f"| {label[arm]} | {c.get('samples', '-')} | {share('train')} | "
                     f"{share('heldout_sizes')} | {share('heldout_task')} | "
                     f"{c['mean_log_speedup']:+.2f} [{c['mean_log_speedup_low']:+.2f}, "
                     f"{c['mean_log_speedup_high']:+.2f}] |" if "faster" in c else
                     f"| {label[arm]} | - | - | {share('heldout_sizes')} | "
                     f"{share('heldout_task')} | - |")
    text = "\n".join(lines)
    (out / "table.md").write_text(text + "\n")
    if json_path is not None:
        result = {"measure": "share of samples faster than the naive kernel (correct, by the "
                             "evaluator's bound where it gives one, and >= 1.1x); secondary: "
                             "mean ln(speedup), failures at ln(0.1); mean over tasks of the "
                             "mean over seeds; 95% stratified bootstrap",
                  "train_tasks": list(TRAIN_TASKS), "heldout_task": HELDOUT_TASK,
                  "ci": ci, "comparisons": comparisons,
                  # what has run: a run cut short (the session ended) resumes from its files
                  "evaluated": sorted(f.stem for f in (out / "eval").glob("*.json")),
                  "complete": all((out / "eval" / f"{a}_seed{s}.json").exists()
                                  for a in ("base", "control", "grpo")
                                  for s in sorted({r["seed"] for r in rows
                                                   if r["arm"] != "teacher"})),
                  "pilot": {k: v for k, v in plan.items() if k != "records"},
                  "wall_seconds": wall,
                  "settings": {"sft": SFT, "grpo": GRPO, "eval_sampling": learning.EVAL_SAMPLING,
                               "measure_overrides": MEASURE_OVERRIDES,
                               "teacher_per_task": TEACHER_PER_TASK},
                  "per_sample": rows}
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return text


# --- driver -----------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/learning_speed")
    ap.add_argument("--pairs", default="runs/teacher/pairs.jsonl")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--steps", type=int, default=4, help="GRPO steps per seed")
    ap.add_argument("--max-samples", type=int, default=210)
    ap.add_argument("--json", default=None)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--grpo", type=int, help=argparse.SUPPRESS)  # a child: one GRPO seed
    ap.add_argument("--eval", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        print(f"--seeds takes comma-separated integers, got {args.seeds!r}", file=sys.stderr)
        sys.exit(2)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.grpo is not None:
        run_grpo(out, args.grpo, args.steps)
        return
    if args.eval:
        run_eval(out, args.eval[0], int(args.eval[1]), json.loads((out / "pilot.json")
                                                                    .read_text()))
        return
    wall_file = out / "wall.json"
    wall = json.loads(wall_file.read_text()) if wall_file.exists() else {}

    def stage(name: str, work) -> None:
        started = time.monotonic()
        work()
        wall[name] = round(wall.get(name, 0.0) + time.monotonic() - started, 1)
        wall_file.write_text(json.dumps(wall, indent=1))

    def child(*extra: str) -> None:
        subprocess.run([sys.executable, __file__, "--out", str(out), "--seeds", args.seeds,
                        "--steps", str(args.steps), *extra], check=True)

    if not args.report_only:
        pairs = Path(args.pairs)
        if not pairs.is_file():
            print(f"no teacher pairs at {pairs}: run python benchmarks/teacher_data.py first",
                  file=sys.stderr)
            sys.exit(2)
        if not (out / "sft_data.jsonl").exists():
            log("SFT data from the teacher's pairs")
            stage("data", lambda: make_data(out, pairs))
        if not (out / "sft" / "merged" / "config.json").exists():
            records = len((out / "sft_data.jsonl").read_text().splitlines())
            log(f"SFT (LoRA) of the default model on {records} kernels")
            stage("sft", lambda: run_sft(out, records))
        log("pilot and power analysis")
        stage("pilot", lambda: run_pilot(out, seeds, args.max_samples))
        plan = json.loads((out / "pilot.json").read_text())
        log(f"pilot: base model {plan['pilot_share_faster']:.1%} faster; {GOAL_SHARE:.0%} needs "
            f"{plan['samples_needed_for_goal']} per arm; taking {plan['samples_per_arm']}")
        for arm in ("base", "control"):
            for seed in seeds:
                if not (out / "eval" / f"{arm}_seed{seed}.json").exists():
                    log(f"evaluating {arm}, seed {seed}")
                    stage(f"eval_{arm}", lambda: child("--eval", arm, str(seed)))
        for seed in seeds:
            if not (out / f"seed{seed}" / "done").exists():
                log(f"GRPO, seed {seed} ({args.steps} steps, speed reward)")
                stage("grpo", lambda: child("--grpo", str(seed)))
            if not (out / "eval" / f"grpo_seed{seed}.json").exists():
                log(f"evaluating grpo, seed {seed}")
                stage("eval_grpo", lambda: child("--eval", "grpo", str(seed)))
        if not (out / "eval" / f"teacher_seed{seeds[0]}.json").exists():
            log("evaluating the teacher (the coder), one seed")
            stage("eval_teacher", lambda: child("--eval", "teacher", str(seeds[0])))
    plan = json.loads((out / "pilot.json").read_text())
    print(report(out, plan, wall, Path(args.json) if args.json else None))


if __name__ == "__main__":
    main()
