"""Multi-turn against single-turn GRPO at the same number of generated tokens, and serial
refinement against parallel sampling at test time. An experiment designed before it runs.

    python experiments/multiturn/multiturn.py [--out runs/multiturn] [--seeds 1,2] [--steps 3]
                          [--arms control,single,multi,...]
                          [--json experiments/multiturn/multiturn.json] [--report-only]

The measure is the learning experiment's (experiments/learning/): a sample's speedup over the
task's naive kernel when it is correct, 0 when it is not, averaged with every task and seed
weighted alike; gains are over a learning-rate-0 control with stratified bootstrap intervals.

Arms, all from the default model itself (the learning experiment found that its SFT start
damaged the model, and opened answers give the base model a reward spread to learn from):

  control   learning rate 0: the base model, sampled with the trained arms' sampler seeds
  single    GRPO, one turn: G = 4 answers per prompt
  multi     GRPO, two turns: G = 2 trajectories per prompt, each an answer, the gym's feedback
            (perfgym.train.multiturn) and a revised answer; the trajectory's return is its
            best turn. At most 2 x 2 = 4 answers per prompt, as single's 4: the same token
            budget per step (a trajectory that reaches the expert's speed stops early and
            spends less; the generated tokens are counted and reported)
  multi_last, multi_discounted
            as multi, with the last turn's score or the discounted mean (gamma 0.4) as the
            return: which return to make the default (`--arms control,multi,multi_last,
            multi_discounted` runs just the comparison of returns)
  single_g2 one turn in groups of G = 2, each task's prompt twice per step: multi's group
            size and answers per step, without the feedback and the second turn

Each trained policy is then measured on the training tasks' improve prompts at the training
size (one turn, as the learning experiment), on a held-out task, and at test time on the
training tasks with a budget of k answers: best of k independent answers (parallel) against the
best of k serial turns (each turn sees the last kernel and the gym's feedback on it).

Stages resume (rerun the same command after a kill).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "learning"))
import learning as L  # noqa: E402  (the learning experiment's sampler, judge and plan)

ARMS = {"single": {"turns": 1, "G": 4},
        "multi": {"turns": 2, "G": 2, "turn_return": "best"},
        # the same trajectories under the two other returns (perfgym.train.turns), to choose
        # the default by measurement
        "multi_last": {"turns": 2, "G": 2, "turn_return": "last"},
        "multi_discounted": {"turns": 2, "G": 2, "turn_return": "discounted", "gamma": 0.4},
        # multi's group size and answers per step without a second turn: each task's prompt
        # twice per step in groups of 2 (is multi's gain the feedback, or the group of 2?)
        "single_g2": {"turns": 1, "G": 2, "groups_per_step": 2 * len(L.TRAIN_TASKS)}}
RETURN_ARMS = ("multi", "multi_last", "multi_discounted")
BUDGETS = (1, 2, 4)  # test-time answers per chain / per parallel group
CHAINS_PER_TASK = 4
PER_CELL = 16  # single-turn samples per seed and task (4 parallel groups of 4)
HELDOUT_PER_SEED = 20
EVAL_TIMEOUT = 900  # seconds for one arm and seed's evaluation (about 5 min when it runs)
MAX_COMPLETION = 320  # tokens per answer; the short tasks' bodies fit (expert: ~300 tokens)
GRPO_BASE = {k: v for k, v in L.GRPO.items() if k not in ("G",)} | {
    "max_completion_length": MAX_COMPLETION}


def log(msg: str) -> None:
    L.log(msg)


def base_model() -> Path:
    from perfgym.models import resolve_model
    return resolve_model()


def grpo_settings(out: Path, arm: str, seed: int, steps: int):
    from perfgym.train import grpo, recipes
    values = dict(GRPO_BASE, **ARMS[arm], steps=steps, model_path=str(base_model()), seed=seed,
                  output_dir=str(out / f"{arm}_seed{seed}"))
    return recipes._settings(grpo.GRPOSettings, values, "grpo")


def run_arm(out: Path, arm: str, seed: int, steps: int) -> None:
    from perfgym.train import grpo
    grpo.train(grpo_settings(out, arm, seed, steps), resume=True)
    (out / f"{arm}_seed{seed}" / "done").write_text("ok\n")


def generated_tokens(out: Path, arm: str, seed: int) -> dict:
    """The tokens the model generated in training (the opening and the gym's feedback are not
    the model's), from the answers in the run store."""
    from transformers import AutoTokenizer

    from perfgym.opening import answer_start
    from perfgym.store import RunStore
    from perfgym.tasks import get_task
    tokenizer = AutoTokenizer.from_pretrained(str(base_model()))
    openings = {t: answer_start(get_task(t)) for t in L.TRAIN_TASKS}
    store = RunStore(out / f"{arm}_seed{seed}")
    tokens = answers = 0
    for c in store.candidates():
        if c.policy != "grpo" or not c.completion:
            continue
        text = c.completion
        for o in openings.values():
            if text.startswith(o):
                text = text[len(o):]
                break
        tokens += len(tokenizer(text, add_special_tokens=False)["input_ids"])
        answers += 1
    store.close()
    return {"tokens": tokens, "answers": answers}


def returns_in_training(out: Path, arm: str, seed: int) -> dict:
    """How often the three returns would have told a trajectory apart in this arm's training:
    from the stored turns, each trajectory's best, last and discounted return. When they are
    equal (a second turn that repeats the first, or scores the same), the choice of return
    cannot change the step."""
    from perfgym.backends import backend_for
    from perfgym.extract import FormatError
    from perfgym.store import RunStore
    from perfgym.tasks import get_task
    from perfgym.train.turns import RETURNS, Turn, trajectory_return
    store = RunStore(out / f"{arm}_seed{seed}")
    trajectories: dict[tuple[str, str], dict[int, Turn]] = {}
    for c in store.candidates():
        if not c.slot.startswith("grpo:mt:") or c.reward is None or not c.outcome:
            continue
        _, _, step, index, turn = c.slot.split(":")
        task = get_task(c.outcome["task"])
        try:
            kernel = backend_for(task).key_text(task, backend_for(task).extract(task,
                                                                                  c.completion))
        except FormatError:
            kernel = None
        trajectories.setdefault((step, index), {})[int(turn)] = Turn(kernel, c.status or "",
                                                                    c.reward)
    store.close()
    counts = {"trajectories": 0, "repeated_kernel": 0, "returns_differ": 0}
    for turns in trajectories.values():
        ordered = [turns[k] for k in sorted(turns)]
        counts["trajectories"] += 1
        counts["repeated_kernel"] += any(t.kernel is not None and t.kernel == ordered[0].kernel
                                         for t in ordered[1:])
        values = {round(trajectory_return(ordered, kind), 9) for kind in RETURNS}
        counts["returns_differ"] += len(values) > 1
    return counts


def serial_chains(model: Path, seed: int) -> list[dict]:
    """CHAINS_PER_TASK chains of max(BUDGETS) turns per training task: each turn answers the
    improve (it worked) or repair (it failed) prompt with the last kernel and its outcome."""
    from perfgym.backends import backend_for
    from perfgym.executors import Request, evaluate_many
    from perfgym.extract import FormatError
    from perfgym.machine import machine_info
    from perfgym.opening import answer_start, full_answer
    from perfgym.policies.openvino import OpenVINOPolicy
    from perfgym.prompts import expand_prompt
    from perfgym.tasks import get_task
    from perfgym.train.grpo import task_prompt
    policy = OpenVINOPolicy(model, cache_gb=4)
    machine, config = machine_info(), L.eval_config(measure=True)
    chains = [{"task": get_task(t), "kernel": None, "prompt": None, "turns": []}
              for t in L.TRAIN_TASKS for _ in range(CHAINS_PER_TASK)]
    for c in chains:
        c["prompt"] = task_prompt(c["task"], "improve", None, machine, L.eval_config())
    for turn in range(max(BUDGETS)):
        policy.seed = seed * 1000 + 17 * turn
        groups = policy.generate([c["prompt"] for c in chains], 1,
                                 openings=[answer_start(c["task"]) for c in chains],
                                 **L.EVAL_SAMPLING)
        answers = [full_answer(answer_start(c["task"]), g[0]) for c, g in zip(chains, groups)]
        outcomes = evaluate_many([Request(c["task"], a, None, config)
                                  for c, a in zip(chains, answers)], progress=True)
        for c, a, o in zip(chains, answers, outcomes):
            c["turns"].append({"status": o.status.value, "measure": L.measure(o)})
            try:
                c["kernel"] = backend_for(c["task"]).extract(c["task"], a)
            except FormatError:
                pass
            parent = c["kernel"] or c["task"].baseline.read_text()
            c["prompt"] = expand_prompt(c["task"], "improve" if o.ok else "repair", parent,
                                        o.to_dict(), None, machine, config=L.eval_config())
    policy.engine.close()
    return [{"task": c["task"].name, "turns": c["turns"]} for c in chains]


def run_eval(out: Path, arm: str, seed: int) -> None:
    path = out / "eval" / f"{arm}_seed{seed}.json"
    if path.exists():
        return
    model = base_model() if arm == "control" else out / f"{arm}_seed{seed}" / "final"
    answers = L.sample(model, list(L.TRAIN_TASKS), PER_CELL, seed)
    other = L.sample(model, [L.HELDOUT_TASK], HELDOUT_PER_SEED, seed)
    result = {"arm": arm, "seed": seed, "model": str(model), "train": L.judge(answers),
              "heldout_task": L.judge(other), "serial": serial_chains(model, seed)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))


# --- report -----------------------------------------------------------------------------------

def test_time(out: Path, arm: str, seeds: list[int]) -> dict:
    """Per budget k: the mean over tasks and seeds of the best measure among k parallel answers
    (disjoint groups of the single-turn samples) and among a chain's first k turns."""
    curve = {}
    for k in BUDGETS:
        parallel, serial = {}, {}
        for s in seeds:
            path = out / "eval" / f"{arm}_seed{s}.json"
            if not path.exists():
                continue
            data = json.loads(path.read_text())
            for t in L.TRAIN_TASKS:
                mine = [r["measure"] for r in data["train"] if r["task"] == t]
                parallel[(s, t)] = [max(mine[i:i + k]) for i in range(0, len(mine) - k + 1, k)]
                serial[(s, t)] = [max(x["measure"] for x in c["turns"][:k])
                                  for c in data["serial"] if c["task"] == t]
        if parallel:
            from perfgym.metrics import arm_mean, bootstrap
            b = bootstrap(serial, parallel)
            curve[k] = {"parallel": arm_mean(parallel), "serial": arm_mean(serial),
                        "serial_minus_parallel": b["diff"], "ci_low": b["diff_low"],
                        "ci_high": b["diff_high"]}
    return curve


def report(out: Path, seeds: list[int], plan: dict, wall: float,
           json_path: Path | None) -> str:
    from perfgym.metrics import arm_mean, bootstrap
    numbers: dict = {"gains": {}, "test_time": {}, "tokens": {}}
    lines = ["| arm | prompts | samples | LR=0 control | trained | gain [95% CI] | "
             "difference [95% CI] |", "|---|---|---|---|---|---|---|"]
    for arm in ARMS:
        for split, label in (("train", "training tasks"),
                             ("heldout_task", f"held-out task ({L.HELDOUT_TASK})")):
            trained, control = L.cells(out, arm, seeds, split), L.cells(out, "control", seeds,
                                                                      split)
            common = sorted(set(trained) & set(control))
            if not common:
                continue
            trained = {k: trained[k] for k in common}
            control = {k: control[k] for k in common}
            b = bootstrap(trained, control)
            row = {"control": arm_mean(control), "trained": arm_mean(trained), **b,
                   "samples": sum(map(len, trained.values()))}
            numbers["gains"].setdefault(arm, {})[split] = {k: L._finite(v) if isinstance(
                v, float) else v for k, v in row.items()}
            lines.append(f"| {arm} | {label} | {row['samples']} | {row['control']:.3f} | "
                         f"{row['trained']:.3f} | {L._pct(b['gain'])} [{L._pct(b['gain_low'])},"
                         f" {L._pct(b['gain_high'])}] | {b['diff']:+.3f} [{b['diff_low']:+.3f},"
                         f" {b['diff_high']:+.3f}] |")
    # multi against the single-turn arms directly (same prompts and sampler seeds at evaluation)
    multi = L.cells(out, "multi", seeds, "train")
    for arm in ("single", "single_g2"):
        single = L.cells(out, arm, seeds, "train")
        common = sorted(set(single) & set(multi))
        if common:
            b = bootstrap({k: multi[k] for k in common}, {k: single[k] for k in common})
            numbers[f"multi_vs_{arm}"] = {k: L._finite(v) for k, v in b.items()}
            lines.append(f"\nmulti against {arm} (training tasks): difference "
                         f"{b['diff']:+.3f} [{b['diff_low']:+.3f}, {b['diff_high']:+.3f}]")
    # the other returns against best (multi; same prompts and sampler seeds at evaluation)
    for arm in RETURN_ARMS[1:]:
        other = L.cells(out, arm, seeds, "train")
        common = sorted(set(multi) & set(other))
        if common:
            b = bootstrap({k: other[k] for k in common}, {k: multi[k] for k in common})
            numbers.setdefault("returns_vs_best", {})[arm] = {k: L._finite(v)
                                                              for k, v in b.items()}
            lines.append(f"{arm} against multi (return: best), training tasks: difference "
                         f"{b['diff']:+.3f} [{b['diff_low']:+.3f}, {b['diff_high']:+.3f}]")
    for arm in RETURN_ARMS:
        counts = [returns_in_training(out, arm, s) for s in seeds
                  if (out / f"{arm}_seed{s}" / "done").exists()]
        if counts:
            total = {k: sum(c[k] for c in counts) for k in counts[0]}
            numbers.setdefault("returns_in_training", {})[arm] = total
            lines.append(f"{arm} in training: the three returns differ on "
                         f"{total['returns_differ']} of {total['trajectories']} trajectories; "
                         f"{total['repeated_kernel']} second turns repeat the first kernel")
    lines += ["", "| arm | k | parallel: best of k | serial: best of k turns | serial - parallel "
              "[95% CI] |", "|---|---|---|---|---|"]
    for arm in ("control", *ARMS):
        curve = test_time(out, arm, seeds)
        numbers["test_time"][arm] = curve
        for k, v in curve.items():
            lines.append(f"| {arm} | {k} | {v['parallel']:.3f} | {v['serial']:.3f} | "
                         f"{v['serial_minus_parallel']:+.3f} [{v['ci_low']:+.3f}, "
                         f"{v['ci_high']:+.3f}] |")
    for arm in ARMS:
        counts = [generated_tokens(out, arm, s) for s in seeds
                  if (out / f"{arm}_seed{s}").exists()]
        if counts:
            numbers["tokens"][arm] = {"tokens": sum(c["tokens"] for c in counts),
                                      "answers": sum(c["answers"] for c in counts)}
    lines.append("\nTokens the model generated in training (all seeds): " + "; ".join(
        f"{arm} {v['tokens']} in {v['answers']} answers" for arm, v in numbers["tokens"].items()))
    lines.append(f"\nPilot (base model): mean {plan['pilot_mean']:.3f}, SD {plan['pilot_sd']:.3f}"
                 f" over {plan['pilot_samples']} samples; +16% needs "
                 f"{plan['samples_needed_for_16pct']} samples per arm; seeds {seeds}; wall "
                 f"{wall / 60:.0f} min.")
    text = "\n".join(lines) + "\n"
    (out / "table.md").write_text(text)
    if json_path is not None:
        result = {"measure": "speedup over the task's naive kernel per sample, failures 0; "
                             "gain = trained / control - 1",
                  "seeds": seeds, "wall_seconds": round(wall), **numbers,
                  "plan": {k: v for k, v in plan.items() if k != "records"},
                  "settings": {"arms": ARMS, "grpo": GRPO_BASE, "eval_sampling": L.EVAL_SAMPLING,
                               "measure_overrides": L.MEASURE_OVERRIDES,
                               "per_cell": PER_CELL, "heldout_per_seed": HELDOUT_PER_SEED,
                               "chains_per_task": CHAINS_PER_TASK, "budgets": BUDGETS}}
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/multiturn")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--steps", type=int, default=3, help="GRPO steps per arm and seed")
    ap.add_argument("--json", default=None, help="write the results here too")
    ap.add_argument("--arms", default=",".join(("control", *ARMS)),
                    help="which arms to train and evaluate (comma-separated)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--arm", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)
    ap.add_argument("--eval", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        print(f"--seeds takes comma-separated integers, got {args.seeds!r}", file=sys.stderr)
        sys.exit(2)
    arms = args.arms.split(",")
    if unknown := [a for a in arms if a not in ("control", *ARMS)]:
        print(f"--arms: {', '.join(unknown)} not among control, {', '.join(ARMS)}",
              file=sys.stderr)
        sys.exit(2)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.arm:
        run_arm(out, args.arm[0], int(args.arm[1]), args.steps)
        return
    if args.eval:
        run_eval(out, args.eval[0], int(args.eval[1]))
        return

    started = time.monotonic()
    wall_file = out / "wall.json"
    before = json.loads(wall_file.read_text())["seconds"] if wall_file.exists() else 0.0

    def spent() -> float:
        return before + time.monotonic() - started

    def child(*extra: str, timeout: float | None = None) -> None:
        # an evaluation child is run again when it hangs: OpenVINO GenAI 2026.4's sampler once
        # waited on a futex forever in the middle of a batch (1% CPU, no progress for 15 min)
        for attempt in range(3):
            try:
                subprocess.run([sys.executable, __file__, "--out", str(out), "--seeds",
                                args.seeds, "--steps", str(args.steps), "--arms", args.arms,
                                *extra], check=True,
                               timeout=timeout)
                break
            except subprocess.TimeoutExpired:
                log(f"{' '.join(extra)} did not finish in {timeout:.0f} s: run again")
        else:
            raise SystemExit(f"{' '.join(extra)} hung three times")
        wall_file.write_text(json.dumps({"seconds": spent()}))

    if not args.report_only:
        log("pilot (the base model) and power analysis")
        # the learning experiment's pilot, of the base model (its sample cap is not used here)
        plan = L.run_pilot(out, base_model(), seeds, max_samples=L.MIN_SAMPLES)
        log(f"pilot: mean {plan['pilot_mean']:.3f}, SD {plan['pilot_sd']:.3f}; +16% needs "
            f"{plan['samples_needed_for_16pct']} samples per arm")
        for seed in seeds:  # a seed whole (trained, then evaluated) before the next
            for arm in (a for a in arms if a != "control"):
                if not (out / f"{arm}_seed{seed}" / "done").exists():
                    log(f"GRPO {arm}, seed {seed} ({args.steps} steps)")
                    child("--arm", arm, str(seed))
            for arm in arms:
                if not (out / "eval" / f"{arm}_seed{seed}.json").exists():
                    log(f"evaluating {arm}, seed {seed}")
                    child("--eval", arm, str(seed), timeout=EVAL_TIMEOUT)
    plan = json.loads((out / "pilot.json").read_text())
    print(report(out, seeds, plan, spent(), Path(args.json) if args.json else None))


if __name__ == "__main__":
    main()
