"""Does the small model learn to write kernels faster than naive at every size, on many tasks,
without forgetting, from the coder's verified kernels, and does GRPO on a reward that pays only
speed add to it? An experiment designed before it runs (issue 52).

    python benchmarks/learning_speed.py --pairs PAIRS.jsonl [--runs RUN_DIR ...]
        [--out runs/learning_speed] [--seeds 1,2,3] [--steps 4] [--rewrite-pairs N]
        [--rewrite-form printed|edit|edit-if] [--mix-copies N] [--mix-naive N]
        [--rename-accumulators] [--plain-casts] [--prompts DIR] [--answer-form code|edits]
        [--hand-back-at-loop] [--anchor-body [loop|leaf]] [--grpo-weights TASK=K,...]
        [--sft-weights TASK=K,...] [--grpo-guide TASK,...] [--sft-line-twins TASK,...]
        [--sft-passes K] [--grpo-beta B]
        [--keep benchmarks/results/learning_speed_run]
        [--json benchmarks/results/learning_speed.json] [--report-only | --confirm-only]

The experiment takes longer than a session (180 minutes), and a later session may get a new
machine without the run directory. After every stage the run's small files (pilot, SFT data,
each evaluation's records, the stage records: KEPT) are copied to --keep, which is committed;
a run on a new machine restores them and goes on. A seed's chain is the unit a session
finishes: a chain cut short after its control's evaluation runs again from its SFT
(`chain_lost`), since adapters are not kept.

PAIRS.jsonl is `perfgym pairs from-runs` over search run stores; --runs are those run stores
(the teacher's correct answers that fill the anti-forgetting mix where the base model has none).

Tasks, fixed first. Training: TRAIN_TASKS (the built-in CPU tasks but the held-out ones).
Held out: HELDOUT_TASKS (histogram, jacobi2d, stencil3d; why these: the comment at the
constant). Nothing trains on a held-out task or on a held-out size.

The measure, chosen first (per sample, on the improve prompt of each task's naive kernel,
opened answers, T 0.3): the share of samples "faster": correct at every size of the split and
the geometric mean of its speedups over the sizes (multisize.aggregate) >= 1.1 (rewards.
SPEED_BAND), faster by the evaluator's bound where it gives one (rewards.faster), and not the
naive kernel handed back (`naive_copy`). Splits: `train`, the training tasks folded over their
train sizes; `heldout_sizes`, some of the same answers folded over the held-out sizes;
`heldout_task`, the held-out tasks folded over their train sizes. Secondary: the mean
ln(speedup), failures at ln(0.1). Intervals: a percentile bootstrap clustered by task and by
seed (`clustered_bootstrap`: tasks, then seeds, then samples within a (task, seed) cell).

Arms (the student is the default model, SmolLM2-135M-Instruct), per seed s of --seeds:
- base: the untouched model, sampled with sampler seed s;
- control: seed s's SFT (its own data order and LoRA init: SFTSettings.seed), which is also
  the learning-rate-0 control of GRPO (LR 0 and beta 0 leave every weight at SFT);
- grpo: seed s's SFT, then GRPO with the speed reward on the folded train sizes (GRPO's
  `sizes` "train"), GRPO_STEPS steps;
- teacher: the coder (Qwen2.5-Coder-1.5B) with its own prompts and token limit, one seed,
  TEACHER_PER_TASK a task: the ceiling.

Stages, each resumable (a rerun after kill -9 skips what is done; `wall.json` keeps each
stage's seconds, `rss.json` each child's peak resident memory and `machines.json` the CPU
each stage ran on: a run resumed in another session may land on another CPU kind, and a
timing is only comparable with timings from the same kind):
1. pilot: which tasks' naive kernels need more than the measure's timeout (`naive_timeouts`),
   then the base model's PILOT_PER_TASK answers per training task, judged at the train
   sizes: its share faster (for the power analysis) and the anti-forgetting mix;
2. data: the pairs' fast kernels of training tasks (held-out tasks dropped, MAX_PAIRS_PER_TASK
   a task) as opened answers, judged again at the train sizes and kept when faster; and per
   training task up to MIX_PER_TASK correct answers at about the naive kernel's speed (`mix`);
   with --rewrite-pairs N, up to N textbook rewrites of each naive kernel, made by rule
   (`rewrite_pairs`; --rewrite-form edit, edit-if or edit-if-loop: only pragma lines added to
   the naive kernel's text), kept when faster, the fastest first; with --mix-copies N, up to N
   of the base model's correct answers that are copies of the naive kernel (`copies_from_pilot`);
   with --mix-naive N, each training task's naive kernel N times (`naive_answers`);
   with --rename-accumulators, each reduction's scalar renamed in every answer
   (`renamed_accumulators`), and with --plain-casts each `((long) i)` written `(long) i`
   (`plain_casts`), before the judging; with --answer-form edits every answer is the
   SEARCH/REPLACE blocks that make its kernel from the naive one (`edit_answer`: a copy of
   the naive kernel is an edit that changes nothing, with --hand-back-at-loop that of its
   loop line; with --anchor-body a pragma's and a hand-back's block holds its loop's body
   too (edits.loop_end; `leaf`: only a loop with no loop inside); a pair that is the naive
   kernel and a rewrite whose blocks are no shorter than it are left out), the trained
   arms are asked for edits by EDIT_PROMPTS, their answers are not opened, and what is judged
   is the kernel the edits make (`with_edit_errors`); the base model and the teacher answer
   with whole kernels (`arm_form`);
3. baselines: the naive kernels timed again where the pilot and data stages left copies;
4. per seed, one chain to its end before the next: the base model's eval, LoRA SFT of the
   default model (its own data order and LoRA init), the control's eval, GRPO from that SFT,
   GRPO's eval; 5. the teacher's eval;
6. confirm: every distinct kernel an evaluation counted faster timed again beside the naive
   kernel in interleaved rounds at every size of its split, and "faster" kept only where the
   rounds agree (learning_confirm: one draw of the baseline's time once made a near-copy
   1.33x). `--confirm-only` runs this stage alone on a run that predates it. About 33
   minutes for 170 kernels on either AMD EPYC: `plan_budget` keeps CONFIRM_SECONDS for it;
7. report: `per_sample` (each answer's kernel), ci_clustered, per-task correctness against
   the base model's, `forgetting`, peak RSS per arm, `faster_examples` (per task, the faster
   kernel the student wrote most often; `examples.md` for the docs page), `heldout_forms`
   (per arm, held-out answers with the `((long) i)` index and with an array-section
   reduction) and the goal check (PASS/FAIL a line).

Cost (the whole experiment <= 4 h on 2 cores). The plan is made after the pilot, on the
machine that runs the run, from COST: seconds per unit of each stage measured by the hint run
on the slowest kind that ran the whole experiment, the 2-core AMD EPYC Zen 4
(benchmarks/results/learning_hint_run/wall.json; 10 training tasks, 3 sizes a split, 10
answers a cell, 3 seeds):
- the pilot: 678.7 s / 240 judgements (10 tasks x 8 answers x 3 sizes) = 2.83 s;
- a pair judged in the data stage: 1,078.8 s / 660 (10 x (16 + 6) x 3) = 1.63 s;
- the baselines: 484.1 s / 69 (task, size) timings = 7.0 s;
- SFT: 2,971.2 s / 288 sequences (3 x 96) = 10.3 s a sequence;
- a GRPO step (5 groups of 4): 2,252.9 s / 12 steps = 188 s;
- the teacher: 676.0 s / 216 judgements (3 x (13 x 4 + 10 x 2)) = 3.13 s;
- a student's answer judged at one size, its generation included: (1,572.6 + 2,573.9 +
  1,926.5) s of eval_base, eval_control and eval_grpo / 4,050 judgements (3 arms x 3 seeds x
  3 x (13 x 10 + 10 x 2)) = 1.50 s;
- the confirm stage: CONFIRM_SECONDS, 2,006 s, the most it has taken.
A figure holds on the machine it was measured on: the plan before this one, from costs the
experiment's first run measured on another AMD EPYC, estimated 3.9 h; it ran 4.5 h on the Zen 4
(the hint run) and 2.1 h on a Zen 5 (learning_speed.json: its judging stages 2-3x faster), and
left out the confirm and baselines stages (41 minutes on the Zen 4). So the
stages that generate and judge answers (pilot, data, baselines, teacher, evaluations) are
scaled by the pilot's own seconds per judgement on this machine against 2.83 s
(`machine_cost`; the pilot stores `pilot_seconds` and the costs it used); SFT and GRPO keep
the Zen 4's (torch's work, the slower kind's). On the Zen 4, with 11 training tasks, 14 in
all and 3 seeds: pilot 747 s, data 1,187 s, baselines 526 s, SFT 2,971 s, GRPO 2,253 s,
teacher 732 s, confirm 2,006 s; that is 10,422 s, which leaves 3,978 s for 9 (arm, seed)
evaluations of 3 x (14 N + 11 x 2) x 1.50 s: N = 5 answers per (task, seed) cell (3,725 s;
6 would be 4,292). Total 14,147 s, 3.9 h (`plan_budget`). Samples per arm: 165 on the
training tasks, 15 per held-out task, 66 at held-out sizes. Where the pilot runs at the Zen
5's rate (1.22 s), N is 22.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
sys.path.insert(0, str(Path(__file__).parent))

import learning  # noqa: E402  (the learning experiment's sampler, base settings)
import learning_confirm  # noqa: E402  ("faster" timed again beside the naive kernel)

# The built-in CPU tasks but the held-out ones.
TRAIN_TASKS = ("dgemm", "sgemm", "dgemv", "spmv", "dot", "transpose", "prefix_sum", "pdist",
               "conv2d", "trsm", "colsum")
# Held out, named before the run, each checked against the training tasks' naive kernels
# (src/perfgym/tasks/builtin/*/naive.c) and the prompts' worked examples (prompts/
# worked_example/, prompts/transforms/: a row loop with a local sum and y[i] = sum, dgemv's;
# a scalar reduction, dot's; a blocked loop; column sums):
# - histogram: a scatter, counts[data[i]]++, after a clearing loop; no training task or worked
#   example scatters. But perfgym's openmp template and the coder's worked example name its
#   parallel fix in words (an array-section reduction, reduction(+:counts[:BINS])): histogram
#   tests a technique the prompts mention, on a loop nest no training kernel has;
# - jacobi2d: a time loop around a 5-point stencil over the interior and a copy back; no
#   training task reads neighbours (transpose's 2-D nest moves each element once);
# - stencil3d: a 3-D 7-point stencil with a boundary test inside the nest.
# (spmv is a training task now: its row loop is dgemv's and the worked example's.)
# colsum (added 2026-12-01): its fast form threads the row loop with an array-section
# reduction, reduction(+:s[:M]), the clause the students never wrote on histogram (not one
# section among 283 clauses, docs/training/learning-speed.md); its nest (rows added into
# column sums) is no held-out task's. Runs before it had ten training tasks.
HELDOUT_TASKS = ("histogram", "jacobi2d", "stencil3d")
TASKS = TRAIN_TASKS + HELDOUT_TASKS
SPLITS = ("train", "heldout_sizes", "heldout_task")
ARMS = ("base", "control", "grpo", "teacher")
STUDENT = "grpo"  # the goal's student: SFT, then GRPO
GOAL_SHARE = 0.20  # the goal: the student's share faster on the training tasks
GOAL_TASKS = 4  # training tasks with faster samples from at least GOAL_TASK_SEEDS seeds
GOAL_TASK_SEEDS = 2
GOAL_SEEDS = 3
FORGETTING = 0.10  # no task's correctness more than 10 points below the base model's
BUDGET_SECONDS = 4 * 3600
SIZES_PER_SPLIT = 3  # every built-in task has 3 train and 3 held-out sizes
PILOT_PER_TASK = 8
MAX_PAIRS_PER_TASK = 16
MIX_PER_TASK = 6
# --rewrite-pairs N: up to N textbook rewrites of each training task's naive kernel, made by
# rule (rewrite_pairs), kept when faster at the train sizes (0: none, as in the committed run)
REWRITE_ORDER = ("sink_sum", "omp_outer", "omp_inner", "simd_inner")  # a textbook's order
REWRITE_FORMS = ("printed", "edit", "edit-if", "edit-if-loop")  # --rewrite-form: see rewrite_pairs
REWRITE_GATES = {"edit-if": "work", "edit-if-loop": "loop"}  # their line_edit gates
# --answer-form: "code", the student's answers are whole kernels (opened: perfgym writes the
# start); "edits", SEARCH/REPLACE blocks of the naive kernel its prompt shows (perfgym.edits),
# asked for by EDIT_PROMPTS (the teacher keeps its own prompts and whole kernels)
ANSWER_FORMS = ("code", "edits")
EDIT_PROMPTS = Path(__file__).resolve().parent / "prompt_variants" / "edits"
TEACHER_PER_TASK = 4
HELDOUT_SIZES_PER_CELL = 2
GRPO_STEPS = 4
SFT_SEQUENCES = 96  # per seed: 32 steps of 3
FAILURE_LOG = math.log(0.1)
REPS = 2000  # bootstrap replicates
KEEP_DIR = Path(__file__).resolve().parent / "results" / "learning_speed_run"
# Seconds per unit of each stage, measured on the slowest kind that ran the whole experiment,
# the 2-core AMD EPYC Zen 4 (family 25 model 17), by the hint run (learning_hint_run/wall.json,
# its plan's units: 10 training tasks, 3 sizes a split, 10 answers a cell, 3 seeds); see the
# module docstring. The answer-judging stages scale with the pilot's own rate on the machine
# at hand (`machine_cost`); training's do not (their work is torch's, not the gym's).
COST = {"pilot_s": 678.7 / 240, "data_s": 1078.8 / 660, "sft_s": 2971.2 / 288,
        "grpo_step_s": 2252.9 / 12, "teacher_s": 676.0 / 216,
        "eval_s": (1572.6 + 2573.9 + 1926.5) / 4050, "baseline_s": 484.1 / 69}
JUDGING = ("pilot_s", "data_s", "teacher_s", "eval_s", "baseline_s")
# Timing each faster answer again beside the naive kernel (the confirm stage): its work is the
# count of distinct faster kernels, not known before the run; the most it took, 2,006 s (Zen
# 5, 170 kernels; 1,968 s on the Zen 4), is kept free.
CONFIRM_SECONDS = 2006.0
# Kernels run on every core: the coder's speedups are OpenMP's (on one thread none of its
# answers to dot, prefix_sum, transpose and histogram beat the naive kernel). The measure's
# evaluations stop a kernel after 3 s and time it for 0.5 s.
MEASURE_OVERRIDES = {"timeout": 3.0, "max_time": 0.5}
# ... but a kernel at the naive kernel's speed must fit. The pilot judges each task's own
# naive kernel at the sizes the run judges it at, with the measure's settings, on the machine
# that runs the experiment (`naive_timeouts`); a task whose naive kernel does not finish in
# time keeps the gym's default timeout (8 s). On the 2-core AMD EPYC (avx2) these were
# transpose (4096 x 4096) and trsm (N=1024, R=256): with 3 s, every answer at about naive
# speed failed by TIMEOUT, and the data stage dropped 15 of 29 transpose pairs and all 6 of its
# mixed-in answers (benchmarks/naive_within_timeout.py measures the same, standalone).
# the speed reward on the folded train sizes; micro-batches of one group (the shared-prefix
# update computes each prompt once); 5 of the 10 prompts a step, so a step costs what it did
GRPO = {**learning.GRPO, "task": ",".join(TRAIN_TASKS), "fixed_prompts": len(TRAIN_TASKS),
        "groups_per_step": 5, "reward": "speed", "sizes": "train", "micro_batch": 4,
        "eval_overrides": {}}
# steps: sft_steps(); no gradient checkpointing: the same weights in 0.77x the time, peak
# RSS 12.5 GB against 7.2 (benchmarks/results/sft_checkpointing_cost.json, the AVX2 EPYC)
SFT = {**{k: v for k, v in learning.SFT.items() if k != "max_steps"},
       "gradient_checkpointing": False}


class InputError(Exception):
    """Bad input to the experiment: one line, exit status 2."""


def fail(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(2)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def eval_config(measure: bool = False, timeout: float | None = None):
    """The gym's settings; with `measure`, the measure's (with `timeout`: a task's own)."""
    from perfgym.config import EvalConfig
    if not measure:
        return EvalConfig()
    return EvalConfig(**{**MEASURE_OVERRIDES, **({"timeout": timeout} if timeout else {})})


def naive_timeouts(tasks) -> dict[str, float]:
    """task -> the gym's default timeout, for each task whose own naive kernel does not finish
    within half the measure's at one of the sizes the run judges it at (train sizes; a training
    task's held-out sizes too). Half: a run is one draw of a spread, and a naive transpose that
    finished within 3 s here once then timed out in 6 of 10 copies of it judged after."""
    from perfgym.tasks import get_task
    answers, which = [], []
    for name in tasks:
        naive = Path(get_task(name).baseline).read_text()
        for split in ("train", "heldout") if name in TRAIN_TASKS else ("train",):
            answers.append((name, naive))
            which.append(split)
    slow = set()
    for split in ("train", "heldout"):
        mine = [a for a, w in zip(answers, which) if w == split]
        half = eval_config(measure=True, timeout=MEASURE_OVERRIDES["timeout"] / 2)
        slow |= {n for (n, _), o in zip(mine, judge(mine, split, config=half))
                 if o.status.value == "TIMEOUT"}
    default = eval_config().timeout
    return {name: default for name in sorted(slow)}


def write_json(path: Path, data) -> None:
    """Written whole or not at all (a kill -9 mid-write leaves no file a rerun trusts)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)


# --- the plan ---------------------------------------------------------------------------------

def plan_budget(seeds: int, steps: int = GRPO_STEPS, cost: dict = COST,
                budget: float = BUDGET_SECONDS, sft_passes: int = 2,
                sft_records: int | None = None) -> dict:
    """The answers per (task, seed) cell that fit the budget, after the stages whose size is
    fixed (the module docstring's arithmetic). per_cell 0: the fixed stages alone do not fit.
    sft_records: the data stage's record count, where it has run (the SFT then trains on
    `sft_steps` of them, not on the cap of SFT_SEQUENCES)."""
    n = SIZES_PER_SPLIT
    sft_sequences = (SFT_SEQUENCES * sft_passes / 2 if sft_records is None
                     else sft_steps(sft_records, passes=sft_passes) * SFT["batch_size"])
    fixed = {"pilot": len(TRAIN_TASKS) * PILOT_PER_TASK * n * cost["pilot_s"],
             "data": len(TRAIN_TASKS) * (MAX_PAIRS_PER_TASK + MIX_PER_TASK) * n * cost["data_s"],
             "baselines": (len(TASKS) + len(TRAIN_TASKS)) * n * cost["baseline_s"],
             "sft": seeds * sft_sequences * cost["sft_s"],
             "grpo": seeds * steps * cost["grpo_step_s"],
             "eval_teacher": n * (len(TASKS) * TEACHER_PER_TASK
                                  + len(TRAIN_TASKS) * HELDOUT_SIZES_PER_CELL) * cost["teacher_s"],
             "confirm": CONFIRM_SECONDS}

    def evals(per_cell: int) -> float:  # base, control, grpo x seeds
        k = min(per_cell, HELDOUT_SIZES_PER_CELL)
        return 3 * seeds * n * (len(TASKS) * per_cell + len(TRAIN_TASKS) * k) * cost["eval_s"]

    per_cell = 0
    while sum(fixed.values()) + evals(per_cell + 1) <= budget:
        per_cell += 1
    seconds = {**fixed, "eval_students": evals(per_cell)}
    return {"per_cell": per_cell, "heldout_sizes_per_cell": min(per_cell, HELDOUT_SIZES_PER_CELL),
            "samples_per_arm": per_cell * seeds * len(TRAIN_TASKS),
            "estimated_seconds": {k: round(v) for k, v in seconds.items()},
            "estimated_total_seconds": round(sum(seconds.values())), "budget_seconds": budget,
            "cost_per_unit_seconds": {k: round(v, 3) for k, v in cost.items()}}


def machine_cost(pilot_seconds: float, pilot_units: int, cost: dict = COST) -> dict:
    """COST on the machine at hand: the stages that generate and judge answers scaled by the
    pilot's seconds per unit here against COST's. A figure holds on the machine it was
    measured on: on a Zen 5 the same stages ran 2-3x faster than on the Zen 4 (a plan from the
    Zen 4's costs would use half the 4 hours there), and a plan from the Zen 5's costs ran
    4.5 h on the Zen 4."""
    scale = pilot_seconds / pilot_units / cost["pilot_s"]
    return {k: v * scale if k in JUDGING else v for k, v in cost.items()}


def samples_needed(p0: float, p1: float = GOAL_SHARE) -> int | None:
    """Samples per arm telling p1 from p0 (two proportions, 95% two-sided, 80% power), iid:
    clustering by task needs more, which the clustered intervals show. None when p0 >= p1."""
    from statistics import NormalDist
    if p0 >= p1:
        return None
    z_a, z_b = NormalDist().inv_cdf(0.975), NormalDist().inv_cdf(0.8)
    pbar = (p0 + p1) / 2
    return math.ceil((z_a * math.sqrt(2 * pbar * (1 - pbar))
                      + z_b * math.sqrt(p0 * (1 - p0) + p1 * (1 - p1))) ** 2 / (p1 - p0) ** 2)


def sft_steps(records: int, batch_size: int = SFT["batch_size"], passes: int = 2) -> int:
    """SFT_SEQUENCES a seed, or two passes over fewer records; --sft-passes K: K passes, and
    the cap K/2 times SFT_SEQUENCES."""
    return max(1, math.ceil(min(SFT_SEQUENCES * passes / 2, passes * records) / batch_size))


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise InputError(f"--seeds takes comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise InputError(f"--seeds takes distinct integers >= 0, got {text!r}")
    return seeds


def parse_weights(text: str, flag: str = "--grpo-weights") -> dict[str, int]:
    """--grpo-weights TASK=K,...: how many times a cycle of the training tasks GRPO meets
    each (1 unless named); --sft-weights: how many times SFT's data holds each record of the
    task."""
    weights: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, k = item.partition("=")
        if name not in TRAIN_TASKS or not k.isdigit() or int(k) < 1:
            raise InputError(f"{flag} takes TRAIN_TASK=K pairs, K at least 1, among "
                             f"{', '.join(TRAIN_TASKS)}; got {item!r}")
        weights[name] = int(k)
    return weights


def parse_guide(text: str, flag: str = "--grpo-guide") -> list[str]:
    """--grpo-guide (or --sft-line-twins) TASK,...: training tasks."""
    tasks = [t.strip() for t in text.split(",") if t.strip()]
    if bad := [t for t in tasks if t not in TRAIN_TASKS]:
        raise InputError(f"{flag} takes training tasks among {', '.join(TRAIN_TASKS)}; "
                         f"got {bad[0]!r}")
    return tasks


def guide_answers(sft_data: Path, tasks: list[str]) -> dict[str, str]:
    """Each task's guide for GRPO (GRPOSettings.guides): its fastest answer in the SFT data,
    every one of which was judged right at the train sizes (dot's reduction edit; prefix_sum's
    copy of the naive kernel, the only right answer the data holds for a scan)."""
    best: dict[str, tuple[float, str]] = {}
    for line in sft_data.read_text().splitlines():
        r = json.loads(line)
        if r["task"] in tasks and r.get("speedup", 0.0) > best.get(r["task"], (-1.0, ""))[0]:
            best[r["task"]] = (r.get("speedup", 0.0), record_answer(r))
    if missing := [t for t in tasks if t not in best]:
        raise InputError(f"--grpo-guide: the SFT data holds no answer to {', '.join(missing)}")
    return {t: answer for t, (_, answer) in best.items()}


def grpo_cycle(weights: dict[str, int]) -> list[str]:
    """The training tasks in the order GRPO's groups cycle through them: every task once, then
    again those weighted more, spread over the cycle (dot=3: the tasks, dot, dot)."""
    most = max(weights.values(), default=1)
    return [t for r in range(most) for t in TRAIN_TASKS if weights.get(t, 1) > r]


# --- judging ----------------------------------------------------------------------------------

def kernel_code(task_name: str, answer: str) -> str | None:
    """The kernel the gym judges in an answer, None when none extracts."""
    from perfgym.backends import backend_for
    from perfgym.extract import FormatError
    from perfgym.tasks import get_task
    task = get_task(task_name)
    try:
        return backend_for(task).extract(task, answer)
    except (FormatError, ValueError):
        return None


def naive_copy(task_name: str, code: str) -> bool:
    """The naive kernel handed back, as the gym flags it (evaluate.is_baseline_copy: up to
    comments, white space, #include lines and renamed variables, so the naive body behind
    perfgym's opening is one); asked here because multisize.aggregate keeps no flags."""
    from perfgym.evaluate import is_baseline_copy
    from perfgym.tasks import get_task
    return is_baseline_copy(get_task(task_name), code)


def folded_low(o) -> float | None:
    """The evaluator's lower bound on the speedup, folded as the speedups are: the geometric
    mean over the sizes of each size's bound (its speedup where it gives none); None when no
    size gives one (a C kernel outside group timing), so the speedup alone decides."""
    from perfgym.metrics import geomean
    if o.speedup_low is not None or not o.per_size:
        return o.speedup_low
    if all(p.get("speedup_low") is None for p in o.per_size):
        return None
    lows = [p["speedup_low"] if p.get("speedup_low") is not None else p.get("speedup")
            for p in o.per_size]
    return 0.0 if any(v is None or v <= 0 for v in lows) else geomean(lows)


def is_faster(o, copy: bool = False) -> bool:
    """Correct at every size, the fold's speedup (a geometric mean) >= SPEED_BAND, faster by
    the evaluator's bound where it gives one (rewards.faster's rule, on `folded_low`), and no
    copy of the naive kernel (`copy`, or the gym's flag at any size: multisize.aggregate
    carries neither flags nor bounds)."""
    from perfgym.rewards import SPEED_BAND
    flagged = "baseline_copy" in o.flags or any("baseline_copy" in (p.get("flags") or [])
                                                 for p in o.per_size)
    if not (o.ok and o.speedup) or copy or flagged:
        return False
    low = folded_low(o)
    return (low if low is not None else o.speedup) > 1.0 and o.speedup >= SPEED_BAND


def log_speedup(o) -> float:
    return math.log(max(o.speedup, 0.1)) if o.ok and o.speedup else FAILURE_LOG


def record(arm: str, seed: int, split: str, task: str, answer: str, o) -> dict:
    """One per_sample record: `speedup` is the fold's (the geometric mean over the split's
    sizes); `code` the kernel the gym judged (the answer itself when none extracts)."""
    from perfgym.tasks import format_size
    code = kernel_code(task, answer)
    copy = code is not None and naive_copy(task, code)
    sizes = [p.get("sizes") or {} for p in o.per_size] or [o.sizes]
    return {"arm": arm, "seed": seed, "split": split, "task": task,
            "sizes": "+".join(format_size(s) for s in sizes), "status": o.status.value,
            "speedup": o.speedup, "faster": is_faster(o, copy), "naive_copy": copy,
            "disturbed": bool(o.disturbed), "log_speedup": log_speedup(o), "code": code if code is not None else answer,
            "answer_sha256": hashlib.sha256(answer.encode()).hexdigest()}


def judge(answers: list[tuple[str, str]], which: str, config=None,
          timeouts: dict[str, float] | None = None) -> list:
    """Each answer's Outcome folded over its task's `which` sizes ("train" or "heldout"):
    multisize.evaluate_folded, one batch per task; the measure's settings unless `config`,
    with a task's own timeout from `timeouts` (naive_timeouts)."""
    from functools import partial

    from perfgym.executors import evaluate_many
    from perfgym.multisize import evaluate_folded
    from perfgym.tasks import get_task
    folded: dict[int, object] = {}
    for name in dict.fromkeys(n for n, _ in answers):
        task = get_task(name)
        mine = [i for i, (n, _) in enumerate(answers) if n == name]
        cfg = config or eval_config(measure=True, timeout=(timeouts or {}).get(name))
        outcomes = evaluate_folded(task, [(answers[i][1], cfg) for i in mine],
                                   task.sizes(which), executor=partial(evaluate_many,
                                                                       progress=True))
        folded.update(zip(mine, outcomes))
    return [folded[i] for i in range(len(answers))]


# --- stages -----------------------------------------------------------------------------------

def base_model() -> Path:
    from perfgym.models import resolve_model
    return resolve_model(None)


def resolved(answers: list[tuple[str, str]], form: str) -> list[tuple[str, str]]:
    """(task, what is judged): `with_edit_errors` without the errors."""
    return [(t, a) for t, a, _ in with_edit_errors(answers, form)]


def with_edit_errors(answers: list[tuple[str, str]], form: str
                     ) -> list[tuple[str, str, str | None]]:
    """(task, what is judged, why its edits did not apply or None): in the edit form each
    answer's edits made on the naive kernel its prompt showed (perfgym.edits.resolve_answer;
    edits that do not apply leave the answer, a FORMAT_ERROR unless it is a whole kernel),
    else the answers as they are."""
    if form != "edits":
        return [(t, a, None) for t, a in answers]
    from perfgym.edits import resolve_answer
    from perfgym.tasks import get_task
    from perfgym.train.grpo import prompt_kernel
    kernels = {t: prompt_kernel(get_task(t), eval_config()) for t in dict.fromkeys(
        t for t, _ in answers)}
    return [(t, *resolve_answer(a, kernels[t])) for t, a in answers]


def run_pilot(out: Path, seeds: list[int], steps: int, templates: Path | None = None,
              form: str = "code") -> None:
    """The base model's answers on the training tasks (sampler seed 999, none of the arms'),
    judged at the train sizes; the plan of the run. Whole kernels, opened, whatever the
    student's form (`arm_form`)."""
    started = time.monotonic()
    timeouts = naive_timeouts(TASKS)
    answers = learning.sample(base_model(), list(TRAIN_TASKS), PILOT_PER_TASK, seed=999,
                              templates=templates if form == "code" else None,
                              config=eval_config())
    outcomes = judge(answers, "train", timeouts=timeouts)
    records = [dict(record("pilot", 999, "train", n, a, o), answer=a)
               for (n, a), o in zip(answers, outcomes)]
    p0 = sum(r["faster"] for r in records) / len(records)
    pilot_seconds = time.monotonic() - started
    plan = plan_budget(len(seeds), steps,
                       cost=machine_cost(pilot_seconds, len(records) * SIZES_PER_SPLIT))
    plan.update(pilot_seconds=round(pilot_seconds, 1), measure_timeouts=timeouts,
                pilot_samples=len(records), pilot_share_faster=p0,
                samples_needed_for_goal=samples_needed(p0), goal_share=GOAL_SHARE,
                prompts_dir=str(templates) if templates else None,
                prompts_sha256=prompts_sha256(templates), answer_form=form)
    write_json(out / "pilot.json", {**plan, "records": records})


def shipped_prompts() -> Path:
    """The perfgym.prompts package's directory: the prompt texts perfgym ships."""
    from importlib import resources
    return Path(str(resources.files("perfgym.prompts")))


def prompts_sha256(templates: Path | None = None, root: Path | None = None) -> str:
    """SHA-256 over every prompt text perfgym ships (`root`: the perfgym.prompts package) and
    the `--prompts` directory's, names and contents: the templates the base model and the
    student are asked with, the coder's worked examples, the transforms. The pilot records it
    (`same_prompts`)."""
    root = root or shipped_prompts()
    digest = hashlib.sha256()
    for tag, top in (("perfgym", root), ("prompts", templates)):
        for path in sorted(top.rglob("*.txt")) if top else []:
            name = f"{tag}/{path.relative_to(top).as_posix()}"
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def same_prompts(out: Path, templates: Path | None = None) -> None:
    """An InputError when the run in `out` began under other prompts: its kept evaluations
    (the base model's, reused by later runs) would be paired with answers to another prompt.
    A pilot from before the fingerprint (none recorded) passes: it cannot be told."""
    pilot = out / "pilot.json"
    began = json.loads(pilot.read_text()).get("prompts_sha256") if pilot.is_file() else None
    now = prompts_sha256(templates)
    if began and began != now:
        raise InputError(f"{out} began under other prompts (SHA-256 {began[:12]}, these "
                         f"{now[:12]}): give a new --out and --keep, or go on from the commit "
                         "and --prompts it began with")


def same_form(out: Path, form: str) -> None:
    """An InputError when the run in `out` began in another answer form (--answer-form): its
    data and evaluations are answers of that form."""
    pilot = out / "pilot.json"
    began = json.loads(pilot.read_text()).get("answer_form", "code") if pilot.is_file() \
        else form
    if began != form:
        raise InputError(f"{out} began with --answer-form {began}: give that, or a new --out "
                         "and --keep")


def same_weights(out: Path, weights: dict[str, int] | list[str],
                 flag: str = "--grpo-weights") -> None:
    """Record the run's --grpo-weights (grpo_weights.json), --sft-weights (sft_weights.json)
    or --grpo-guide (grpo_guide.json, a list of tasks); an InputError when it began with
    others: a seed's GRPO would meet its tasks, or its SFT its data, otherwise than
    another's."""
    path = out / f"{flag.removeprefix('--').replace('-', '_')}.json"
    began = json.loads(path.read_text()) if path.is_file() else weights
    if began != weights:
        named = (",".join(f"{t}={k}" for t, k in began.items()) if isinstance(began, dict)
                 else ",".join(began)) or "''"
        raise InputError(f"{out} began with {flag} {named}: give that, or a new "
                         "--out and --keep")
    write_json(path, weights)


def same_setting(out: Path, flag: str, value, default, trained: str) -> None:
    """Record the run's value of `flag` (--sft-passes: sft_passes.json, --grpo-beta:
    grpo_beta.json); an InputError when it began with another: its seeds would differ in
    more than their seed. A run that has `trained` files (a glob) and no record began before
    the option, with its `default`."""
    path = out / f"{flag.removeprefix('--').replace('-', '_')}.json"
    began = (json.loads(path.read_text())["value"] if path.is_file()
             else default if any(out.glob(trained)) else value)
    if began != value:
        raise InputError(f"{out} began with {flag} {began}: give that, or a new --out "
                         "and --keep")
    write_json(path, {"value": value})


def kept_setting(out: Path, name: str, default):
    """A setting the run recorded (`same_weights`' lists, `same_setting`'s values), or its
    default where it recorded none."""
    path = out / f"{name}.json"
    if not path.is_file():
        return default
    value = json.loads(path.read_text())
    return value["value"] if isinstance(value, dict) and "value" in value else value


def same_passes(out: Path, passes: int) -> None:
    same_setting(out, "--sft-passes", passes, 2, "sft_seed*/done")


def same_beta(out: Path, beta: float) -> None:
    same_setting(out, "--grpo-beta", beta, 0.0, "seed*/done")


def opened_answer(task_name: str, code: str) -> str | None:
    """The kernel as an opened answer (perfgym's opening, then its body), None when it does
    not have that shape."""
    from perfgym.opening import answer_start
    from perfgym.tasks import get_task
    from perfgym.train.sft_data import opened_body
    task = get_task(task_name)
    body = opened_body(task, code)
    return None if body is None else answer_start(task) + body


def edit_answer(task_name: str, code: str, hand_back: bool = False,
                at_loop: bool = False, body: str | None = None) -> tuple[str | None, str]:
    """(the kernel as an edit answer, "") or (None, why not): the SEARCH/REPLACE blocks that
    make it from the naive kernel the improve prompt shows (perfgym.edits.edits_between).
    The naive kernel itself is an edit that changes nothing (perfgym.edits.no_change) where
    `hand_back` (the copies of --mix-copies and --mix-naive), else None: nothing to edit.
    None for a rewrite, whose blocks are no shorter than the kernel: they would teach copying
    whole kernels into SEARCH, the copying this form is there to spare (234 of the 237
    teacher pairs of 2026-12-01 are such). `at_loop` (--hand-back-at-loop): a hand-back is
    the no-change edit of the kernel's first loop line, whatever the copy added (headers).
    `body` (--anchor-body "loop" or "leaf"): a block anchored on a loop line holds the loop's
    body too (edits.loop_end)."""
    from perfgym.edits import edits_between, no_change
    from perfgym.tasks import get_task
    from perfgym.train.grpo import prompt_kernel
    kernel = prompt_kernel(get_task(task_name), eval_config())
    if hand_back and at_loop:
        return no_change(kernel, at_loop=True, body=body), ""
    text = edits_between(kernel, code)
    if not text:
        return (no_change(kernel, body=body), "") if hand_back else \
            (None, "the naive kernel: no edit")
    if len(text) >= len(code):
        return None, (f"a rewrite, not an edit: its edits ({len(text)} characters) are no "
                      f"shorter than the kernel ({len(code)})")
    # edit or rewrite is told on the line-anchored blocks: a body-anchored one writes its
    # loop's lines twice, and a length allowance for that let whole-kernel blocks in
    return (edits_between(kernel, code, body=body) if body else text), ""


def usable_pairs(pairs: list, skipped: dict) -> list:
    """The pairs of training tasks (a held-out task's never), one per distinct fast kernel,
    MAX_PAIRS_PER_TASK a task taken round-robin over the runs they came from (so one run's
    many draws do not fill a task). Why each other pair was left out goes into `skipped`."""
    from perfgym.extract import normalize
    by_task: dict[str, dict[str, list]] = {}
    seen: set[tuple[str, str]] = set()
    for p in pairs:
        if p.task not in TRAIN_TASKS:
            skipped[p.file_id] = ("a held-out task" if p.task in HELDOUT_TASKS
                                  else f"not a training task ({p.task})")
            continue
        key = (p.task, normalize(p.fast))
        if key in seen:
            skipped[p.file_id] = "the same fast kernel as an earlier pair"
            continue
        seen.add(key)
        by_task.setdefault(p.task, {}).setdefault(str(p.extra.get("run")), []).append(p)
    kept = []
    for task, runs in by_task.items():
        queues, taken = [list(v) for v in runs.values()], []
        while any(queues):
            taken += [q.pop(0) for q in queues if q]
        kept += taken[:MAX_PAIRS_PER_TASK]
        for p in taken[MAX_PAIRS_PER_TASK:]:
            skipped[p.file_id] = f"past {MAX_PAIRS_PER_TASK} pairs of {task}"
    return kept


def mix_from_pilot(records: list[dict]) -> dict[str, list[str]]:
    """Anti-forgetting answers: per training task up to MIX_PER_TASK of the base model's own
    distinct pilot kernels that are correct at every train size at about the naive kernel's
    speed or better (fold >= 1 / SPEED_BAND), none a copy of the naive kernel.

    Why these: they keep what the base model could do (dot and prefix_sum at 42 of 42 before
    the first SFT took them to 0) with kernels it wrote itself. The naive body as an opened
    answer would be the honest-looking alternative, but the gym does not flag it as a copy
    (`naive_copy`): it would teach the student to hand back the kernel it is shown and count
    that as correctness, so copies are left out, here and in the teacher's fill."""
    from perfgym.extract import normalize
    from perfgym.rewards import SPEED_BAND
    mix: dict[str, list[str]] = {}
    seen: set[str] = set()
    for r in records:
        task, code = r["task"], r["code"]
        if task not in TRAIN_TASKS or r["status"] != "OK" or r["naive_copy"] \
                or (r["speedup"] or 0.0) < 1.0 / SPEED_BAND or normalize(code) in seen:
            continue
        if len(mix.setdefault(task, [])) < MIX_PER_TASK:
            seen.add(normalize(code))
            mix[task].append(code)
    return mix


def copies_from_pilot(records: list[dict], per_task: int) -> dict[str, list[str]]:
    """--mix-copies N: per training task up to N of the base model's correct pilot answers
    that ARE the naive kernel handed back, as sampled: a copy the base model wrote twice is
    there twice, since distinct texts would give dot two and prefix_sum one (0: none).

    Why a lever: the base model's right answers on dot and prefix_sum are copies, so the mix
    above has nothing for them, and the edit-form student threads their loops (a race: dot
    100% -> 67-70%, prefix_sum 100% -> 43-60% correct). A copy is the right answer where no
    faster kernel is known (a scan); whether it keeps those tasks without teaching copies
    elsewhere is what a run measures (the arms' `naive_copy` share)."""
    copies: dict[str, list[str]] = {}
    for r in records:
        task, code = r["task"], r["code"]
        if task in TRAIN_TASKS and r["status"] == "OK" and r["naive_copy"] \
                and len(copies.get(task, [])) < per_task:
            copies.setdefault(task, []).append(code)
    return copies


def naive_answers(per_task: int, tasks=TRAIN_TASKS) -> dict[str, list[str]]:
    """--mix-naive N: each training task's own naive kernel, N times, as the answer (0: none).

    Why a lever: every trained arm forgets the held-out tasks (histogram 20% -> 0%, stencil3d
    67% -> 17-25% correct in the copies run), mostly by COMPILE_ERROR: the student edits a
    nest it has not seen into code that does not build, where the base model handed it back.
    --mix-copies keeps the tasks whose copies the base model wrote (dot, prefix_sum); the naive
    kernel of every training task, by rule, teaches handing back a nest on every loop shape.
    What it costs in faster answers on the training tasks is what a run measures."""
    from perfgym.tasks import get_task
    return {t: [get_task(t).baseline.read_text()] * per_task for t in tasks} if per_task else {}


# names a renamed accumulator takes (--rename-accumulators), none a C keyword or a libc name
ACCUMULATOR_NAMES = ("acc", "total", "partial", "s", "r", "run", "tally", "agg")
REDUCTION_CLAUSE = re.compile(r"reduction\s*\(\s*[^:()]+:\s*([^)]*)\)")


def renamed_accumulators(task_name: str, code: str, ident: str) -> str:
    """--rename-accumulators: each scalar a `reduction(...)` clause names, when it is the
    kernel's own variable (not a parameter), renamed in the whole answer to a name picked by
    the record's id and not already in the code.

    Why a lever: 58 of the 62 reduction clauses in the naive-mix run's SFT answers name `sum`,
    and the students wrote `reduction(+:sum)` into the held-out histogram, a loop with no `sum`
    (16 of the SFT's 28 answers there that do not build). Other names teach that the clause
    names the kernel's variable. The renamed answer is judged again like every answer."""
    from perfgym.tasks import get_task
    params = set(re.findall(r"(\w+)\s*(?=[,)])", get_task(task_name).entry.split("(", 1)[1]))
    scalars = {name.strip() for clause in REDUCTION_CLAUSE.findall(code)
               for name in clause.split(",") if re.fullmatch(r"\s*[A-Za-z_]\w*\s*", name)}
    start = int(hashlib.sha256(ident.encode()).hexdigest(), 16)
    for name in sorted(scalars - params):
        free = [n for n in ACCUMULATOR_NAMES if not re.search(rf"\b{n}\b", code)]
        if free:
            code = re.sub(rf"\b{name}\b", free[start % len(free)], code)
    return code


# `((long) i)`: a cast of one name in parentheses of its own, the climb's printed index form
PARENTHESIZED_CAST = re.compile(r"\(\(\s*long\s*\)\s*([A-Za-z_]\w*)\s*\)")


def plain_casts(code: str) -> str:
    """--plain-casts: each `((long) i)` of an answer written `(long) i`, the form the naive
    kernels use (stencil3d's `((long)x * NY + y) * NZ + z`). The same arithmetic: a cast
    binds tighter than `*`, so `(long) i * N` widens i before the product as `((long) i) * N`
    does.

    Why a lever: 35 of the copies run's 146 SFT answers (the climb's kernels among the pairs:
    trsm, transpose, dgemv, pdist, ...) index as `A[((long) i) * N + j]`, and the students
    wrote that form into held-out nests where it does not fit: 20 of the copies run's 49 GRPO
    answers to held-out tasks that do not build have a `((long) x)` on a line whose
    parentheses do not balance, e.g. stencil3d's index as `((long)x) * (NY) + y) * (NZ) + z`
    (the base model: none). Every changed answer is judged again like every answer."""
    return PARENTHESIZED_CAST.sub(r"(long) \1", code)


def kept_teacher_answers(sft_data: Path) -> list[tuple[str, str]]:
    """(task, answer): the teacher's answers in a kept run's sft_data.jsonl (its mix_teacher
    records), in their order: a machine without the search run stores that run read can
    still give a new run the same mix (each answer is judged again like a run store's)."""
    answers = []
    for line in sft_data.read_text().splitlines():
        record = json.loads(line)
        if record.get("source") == "mix_teacher":
            answers.append((record["task"], record["completion"][-1]["content"]))
    return answers


def teacher_answers(source: Path) -> list[tuple[str, str]]:
    """(task, answer): a search run store's correct, non-copied answers, or a kept
    sft_data.jsonl's teacher answers."""
    from perfgym.store import RunStore
    if source.is_file():
        return kept_teacher_answers(source)
    store = RunStore(source)
    try:
        task = (store.config() or {}).get("task")
        return [(task, c.completion) for c in store.candidates()
                if c.op != "seed" and c.ok and not c.copied]
    finally:
        store.close()


def mix_from_runs(run_dirs: list[Path], need: dict[str, int]) -> list[tuple[str, str]]:
    """(task, kernel): the teacher's correct answers in search run stores (or kept
    sft_data.jsonl files), `need[task]` of each training task at most, distinct, none a copy
    of the naive kernel (judged again later)."""
    from perfgym.extract import normalize
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    for run_dir in run_dirs:
        for task, answer in teacher_answers(run_dir):
            if need.get(task, 0) <= 0:
                continue
            code = kernel_code(task, answer)
            if code is None or normalize(code) in seen or naive_copy(task, code):
                continue
            seen.add(normalize(code))
            found.append((task, code))
            need[task] -= 1
    return found


def rewrite_pairs(tasks=TRAIN_TASKS, form: str = "printed") -> list[tuple[str, str, str]]:
    """(task, kernel, id): each task's naive kernel under every chain of perfgym's textbook
    rewrites (perfgym.search.rewrites) taken in REWRITE_ORDER, each step optional and applied
    where it applies; distinct kernels only, the naive kernel itself never. `form` "printed":
    the rewrites as the climb makes them (the kernel printed again, a threaded nest copied
    under a work bound); "edit": only the pragma rewrites, each a line added to the naive
    kernel's own text (`line_edit`: what the printed form's run taught a wrong index, below);
    "edit-if": the same lines, each thread pragma with the work bound as its `if` clause;
    "edit-if-loop": with its loop's own bound instead, as the line below writes it (`if(M >
    16)`: the student wrote the work bound's names wrong on a nest it had not seen).

    Why: the student's wrong answers on the held-out tasks were rewrites far from the kernel it
    was shown (median similarity to it 0.45, difflib over the normalized code), its right ones
    edits of it (all above 0.8); the teacher's pairs are rewrites too (median 0.42-0.70 a task,
    17 of 237 above 0.8). A rule's rewrite is an edit: the kernel shown with a pragma added or
    two loops exchanged, which a loop nest the student has not seen also takes. Each is judged
    as a pair is (kept when faster at the train sizes)."""
    from perfgym.extract import normalize
    from perfgym.search.rewrites import LINE_EDITS, applicable, line_edit
    from perfgym.tasks import get_task
    if form not in REWRITE_FORMS:
        raise ValueError(f"rewrite form {form!r}: one of {', '.join(REWRITE_FORMS)}")
    steps_of = REWRITE_ORDER if form == "printed" else \
        tuple(s for s in REWRITE_ORDER if s in LINE_EDITS)
    found: list[tuple[str, str, str]] = []
    for name in tasks:
        task = get_task(name)
        entry, naive = task.signature.name, task.baseline.read_text()
        chains = [((), naive)]
        for step in steps_of:  # each chain, with and without this step
            made = ((steps, applicable(code, entry).get(step) if form == "printed"
                     else line_edit(code, entry, step, gate=REWRITE_GATES.get(form)))
                    for steps, code in chains)
            chains += [(steps + (step,), new) for steps, new in list(made) if new]
        seen = {normalize(naive)}
        for steps, code in chains[1:]:
            if normalize(code) not in seen:
                seen.add(normalize(code))
                label = "rewrite" if form == "printed" else form
                found.append((name, code, f"{name}/{label}:{'+'.join(steps)}"))
    return found


def best_rewrites(records: list[dict], per_task: int, skipped: dict) -> list[dict]:
    """The records, with at most `per_task` rewrite pairs a task: the fastest."""
    by_task: dict[str, list[dict]] = {}
    for r in records:
        if r["source"] == "rewrite":
            by_task.setdefault(r["task"], []).append(r)
    dropped = set()
    for task, mine in by_task.items():
        for r in sorted(mine, key=lambda r: -(r["speedup"] or 0.0))[per_task:]:
            dropped.add(id(r))
            skipped[r["kernel"]] = f"past {per_task} rewrite pairs of {task}"
    return [r for r in records if id(r) not in dropped]


def sft_record(task_name: str, joined: str, prompts: dict, form: str = "code",
               **extra) -> dict:
    """An SFT record: the improve prompt GRPO and the evaluation send, and the answer (opened:
    its fence closed after the body; edits: the blocks alone)."""
    answer = joined + "\n```" if form == "code" else joined
    return {"prompt": [{"role": "user", "content": prompts[task_name]}],
            "completion": [{"role": "assistant", "content": answer}],
            "task": task_name, **extra}


def record_answer(r: dict) -> str:
    """What an SFT record's answer gives the gym: the opened answer without the fence that
    closes it, or the edit blocks as they are (resolved against the naive kernel later)."""
    text = r["completion"][0]["content"]
    return text.removesuffix("\n```") if r.get("answer_form", "code") == "code" else text


def improve_prompts(tasks, templates: Path | None = None) -> dict[str, str]:
    """Each task's improve prompt, as GRPO's fixed mode and the evaluation send it."""
    from perfgym.machine import machine_info
    from perfgym.tasks import get_task
    from perfgym.train.grpo import task_prompt
    machine, config = machine_info(), eval_config()
    return {t: task_prompt(get_task(t), "improve", None, machine, config, templates)
            for t in tasks}


def token_counts(records: list[dict]) -> list[int]:
    """Each SFT record's tokens as SFT sees them: the student's chat template over its prompt
    and answer."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(str(base_model()))
    texts = [tokenizer.apply_chat_template(r["prompt"] + r["completion"], tokenize=False)
             for r in records]
    return [len(tokenizer(t)["input_ids"]) for t in texts]


def verified_records(todo: list[tuple[str, str, str, str]], timeouts: dict[str, float],
                     templates: Path | None = None, form: str = "code"
                     ) -> tuple[list[dict], dict]:
    """todo: (task, opened answer, source, id). Pairs ("pair") are kept when faster, mix
    answers when correct at about naive speed or better; all judged at the train sizes. A
    record longer than SFT's max_length is left out before it is judged: SFT would cut its
    answer short and teach the cut."""
    from perfgym.rewards import SPEED_BAND
    prompts = improve_prompts(dict.fromkeys(t for t, *_ in todo), templates)
    records = [sft_record(task, joined, prompts, form, source=source, kernel=ident,
                          **({"answer_form": form} if form != "code" else {}))
               for task, joined, source, ident in todo]
    skipped, fits = {}, []
    for r, n in zip(records, token_counts(records)):
        if n > SFT["max_length"]:
            skipped[r["kernel"]] = f"{n} tokens, past SFT's max_length {SFT['max_length']}"
        else:
            fits.append(r)
    outcomes = judge(resolved([(r["task"], record_answer(r)) for r in fits], form), "train",
                     timeouts=timeouts)
    kept = []
    for r, o in zip(fits, outcomes):
        keep = is_faster(o) if r["source"] in ("pair", "rewrite") else \
            (o.ok and (o.speedup or 0.0) >= 1.0 / SPEED_BAND)
        if keep:
            kept.append({**r, "speedup": o.speedup})
        else:
            skipped[r["kernel"]] = (f"{o.status.value}, {o.speedup or 0:.2f}x naive at the "
                                    "train sizes")
    return kept, skipped


def make_data(out: Path, pairs_file: Path, run_dirs: list[Path],
              rewrites_per_task: int = 0, rewrite_form: str = "printed",
              copies_per_task: int = 0, naive_per_task: int = 0,
              rename_accumulators: bool = False, plain_index_casts: bool = False,
              templates: Path | None = None, answer_form: str = "code",
              hand_back_at_loop: bool = False, anchor_body: str | None = None) -> None:
    """The SFT data: verified pairs, up to `rewrites_per_task` rewrite pairs a task
    (rewrite_pairs), the anti-forgetting mix, up to `copies_per_task` of the base model's
    correct copies a task (copies_from_pilot) and `naive_per_task` copies of each task's naive
    kernel (naive_answers), never a held-out task; the prompts from `templates` (--prompts)
    where it has them; each kernel as an opened answer, or in the edit form as the edits that
    make it from the naive kernel (`edit_answer`; `hand_back_at_loop`: its copies anchored on
    the loop line; `anchor_body`: each block anchored on a loop, "leaf" one with no loop
    inside, holds its body too)."""
    from perfgym.train.pairs import read_pairs
    from perfgym.train.sft_data import write_examples
    skipped: dict[str, str] = {}
    every_pair = read_pairs(pairs_file)
    pairs = usable_pairs(every_pair, skipped)

    def as_answer(task: str, code: str, ident: str, hand_back: bool = False) -> str | None:
        """The answer form of `code`, or None with the reason in `skipped` (the opened form
        gives one for pairs alone, as it always has); `hand_back`: see edit_answer."""
        if answer_form == "code":
            joined = opened_answer(task, code)
            if joined is None and ident in pair_ids:
                skipped[ident] = "not the shape of an opened answer"
            return joined
        if rename_accumulators:  # (the opened form renames the answer below)
            code = renamed_accumulators(task, code, ident)
        text, why = edit_answer(task, plain_casts(code) if plain_index_casts else code,
                                hand_back, at_loop=hand_back_at_loop, body=anchor_body)
        if text is None:
            skipped[ident] = why
        return text

    pair_ids = {p.file_id for p in pairs}
    todo = [(p.task, joined, "pair", p.file_id) for p in pairs
            if (joined := as_answer(p.task, p.fast, p.file_id)) is not None]
    if rewrites_per_task > 0:
        todo += [(task, joined, "rewrite", ident)
                 for task, code, ident in rewrite_pairs(form=rewrite_form)
                 if (joined := as_answer(task, code, ident)) is not None]
    pilot = json.loads((out / "pilot.json").read_text())
    mix = mix_from_pilot(pilot["records"])
    copies = copies_from_pilot(pilot["records"], copies_per_task)
    for source, name, by_task in (("mix_base", "pilot", mix), ("mix_copy", "pilot-copy", copies),
                                  ("mix_naive", "naive", naive_answers(naive_per_task))):
        todo += [(task, joined, source, f"{task}/{name}#{i}")
                 for task, codes in by_task.items() for i, c in enumerate(codes)
                 if (joined := as_answer(task, c, f"{task}/{name}#{i}",
                                         source != "mix_base")) is not None]
    need = {t: MIX_PER_TASK - len(mix.get(t, [])) for t in TRAIN_TASKS}
    for i, (task, code) in enumerate(mix_from_runs(run_dirs, need)):
        if (joined := as_answer(task, code, f"{task}/runs#{i}")) is not None:
            todo.append((task, joined, "mix_teacher", f"{task}/runs#{i}"))
    # (the edit form renamed and cast above, in the kernels its edits make)
    if rename_accumulators and answer_form == "code":
        todo = [(task, renamed_accumulators(task, joined, ident), source, ident)
                for task, joined, source, ident in todo]
    if plain_index_casts and answer_form == "code":
        todo = [(task, plain_casts(joined), source, ident) for task, joined, source, ident in todo]
    records, failed = verified_records(todo, pilot.get("measure_timeouts", {}), templates,
                                       answer_form)
    skipped.update(failed)
    records = best_rewrites(records, rewrites_per_task, skipped)
    if leaked := {r["task"] for r in records} & set(HELDOUT_TASKS):
        raise RuntimeError(f"held-out tasks in the SFT data: {sorted(leaked)}")
    summary = data_summary(records, skipped)
    summary["rewrites_per_task"] = rewrites_per_task  # the cap (--rewrite-pairs)
    summary["rewrite_form"] = rewrite_form
    summary["copies_per_task"] = copies_per_task  # the cap (--mix-copies)
    summary["naive_per_task"] = naive_per_task  # --mix-naive
    summary["rename_accumulators"] = rename_accumulators
    summary["plain_casts"] = plain_index_casts  # --plain-casts
    summary["answer_form"] = answer_form  # --answer-form
    summary["hand_back_at_loop"] = hand_back_at_loop  # --hand-back-at-loop
    summary["anchor_body"] = anchor_body  # --anchor-body
    # which teacher data this run used: the committed file grows with later searches
    summary["pairs_file"] = {"path": str(pairs_file), "pairs": len(every_pair),
                             "sha256": hashlib.sha256(pairs_file.read_bytes()).hexdigest()}
    write_json(out / "data.json", summary)
    if not summary["pairs"] + summary["rewrite_pairs"]:  # (the edit form keeps few pairs)
        raise SystemExit(f"none of the {len(pairs)} usable pairs, nor a rewrite pair, verified "
                         f"faster at the train sizes; see {out / 'data.json'}")
    write_examples(out / "sft_data.jsonl.tmp", records)
    os.replace(out / "sft_data.jsonl.tmp", out / "sft_data.jsonl")
    log(f"SFT data: {summary['pairs']} pairs of {len(summary['pairs_per_task'])} tasks, "
        f"{summary['mix']} mixed-in answers ({len(skipped)} left out, see data.json)")


def data_summary(records: list[dict], skipped: dict) -> dict:
    """What the SFT data holds, per training task: pairs and mixed-in answers by source."""
    per_task = {t: {s: sum(r["task"] == t and r["source"] == s for r in records)
                    for s in ("pair", "rewrite", "mix_base", "mix_teacher", "mix_copy",
                              "mix_naive")}
                for t in TRAIN_TASKS}
    return {"records": len(records), "pairs": sum(r["source"] == "pair" for r in records),
            "rewrite_pairs": sum(r["source"] == "rewrite" for r in records),
            "mix": sum(r["source"].startswith("mix") for r in records),
            "pairs_per_task": {t: c["pair"] for t, c in per_task.items() if c["pair"]},
            "rewrite_pairs_per_task": {t: c["rewrite"] for t, c in per_task.items()
                                       if c["rewrite"]},
            "mix_per_task": {t: {"base": c["mix_base"], "teacher": c["mix_teacher"],
                                 "copy": c["mix_copy"], "naive": c["mix_naive"]}
                             for t, c in per_task.items()},
            "skipped": skipped}


def weighted_records(lines: list[str], weights: dict[str, int]) -> list[str]:
    """The SFT data's records (JSON lines) with each record of a task --sft-weights names K
    times in all, its copies in the place of the one."""
    return [line for line in lines for _ in range(weights.get(json.loads(line)["task"], 1))]


def line_twin(record: dict) -> dict | None:
    """The same kernel's edit answer with its blocks anchored on the loop line alone (a
    hand-back: the no-change edit of the first loop line), where the record's own answer is
    anchored through a loop's body; else None.

    Why: under --anchor-body leaf a scan's SEARCH is the whole loop, a nest's the `for` line.
    A student that starts the scan's SEARCH as a nest's (the `for` line, then `=======`)
    meets a point the data never showed it for that task, and writes the nests' pragma
    there: 14 of 40 answers of the leaf run's seed-3 control to prefix_sum, sampled as its
    evaluation samples, were `parallel for` without a reduction, each anchored on the `for`
    line alone (docs/training/learning-speed.md). The twin answers from that point too."""
    from perfgym.edits import apply_edits, edits_between, no_change
    from perfgym.tasks import get_task
    from perfgym.train.grpo import prompt_kernel
    if record.get("answer_form") != "edits":
        return None
    kernel = prompt_kernel(get_task(record["task"]), eval_config())
    answer = record["completion"][-1]["content"]
    code = apply_edits(kernel, answer)
    twin = (edits_between(kernel, code) if code.splitlines() != kernel.splitlines()
            else no_change(kernel, at_loop=True))
    if twin == answer or apply_edits(kernel, twin).splitlines() != code.splitlines():
        return None
    return {**record, "completion": [{"role": "assistant", "content": twin}],
            "anchor": "line"}


def twinned_records(lines: list[str], tasks: list[str]) -> list[str]:
    """The SFT data's records (JSON lines), each record of `tasks` (--sft-line-twins) that
    has a `line_twin` followed by it."""
    out = []
    for line in lines:
        out.append(line)
        record = json.loads(line)
        if record["task"] in tasks and (twin := line_twin(record)):
            out.append(json.dumps(twin))
    return out


def run_sft(out: Path, seed: int, weights: dict[str, int] | None = None,
            twins: list[str] = (), passes: int = 2) -> None:
    """Seed s's SFT. --sft-line-twins adds records (`twinned_records`), --sft-weights repeats
    them (`weighted_records`); both leave the count of steps as the records of sft_data.jsonl
    make it: the levers change what a step sees, not how many."""
    from perfgym.train.sft import SFTSettings, train
    pairs = out / "sft_data.jsonl"
    lines = pairs.read_text().splitlines()
    if weights or twins:
        pairs = out / f"sft_seed{seed}_data.jsonl"
        pairs.write_text("".join(line + "\n" for line in
                                 weighted_records(twinned_records(lines, list(twins)),
                                                  weights or {})))
    train(SFTSettings(model_path=None, pairs=str(pairs),
                      output_dir=str(out / f"sft_seed{seed}"), seed=seed,
                      max_steps=sft_steps(len(lines), passes=passes), **SFT))
    (out / f"sft_seed{seed}" / "done").write_text("ok\n")


def run_grpo(out: Path, seed: int, steps: int, templates: Path | None = None,
             form: str = "code", weights: dict[str, int] | None = None,
             guide: list[str] = (), beta: float = 0.0) -> None:
    from perfgym.train import grpo, recipes
    cycle = grpo_cycle(weights or {})
    values = dict(GRPO, task=",".join(cycle), fixed_prompts=len(cycle), steps=steps,
                  guides=guide_answers(out / "sft_data.jsonl", list(guide)) if guide else {},
                  model_path=str(out / f"sft_seed{seed}" / "merged"),
                  seed=seed, output_dir=str(out / f"seed{seed}"),
                  beta=beta,  # --grpo-beta: TRL's KL to the adapter-less model, the SFT weights
                  templates=str(templates) if templates else None,
                  **({"answer_start": False, "answer_form": "edits"} if form == "edits"
                     else {}))
    grpo.train(recipes._settings(grpo.GRPOSettings, values, "grpo"), resume=True)
    (out / f"seed{seed}" / "done").write_text("ok\n")


def arm_model(out: Path, arm: str, seed: int, templates: Path | None = None) -> tuple:
    """(model, sampling, prompt templates): the teacher with its own sampler and prompts, the
    others with `templates` (--prompts)."""
    from perfgym.models import default_sampling, prompt_templates
    if arm == "teacher":
        return "coder", default_sampling("coder"), prompt_templates("coder")
    model = {"base": base_model(), "control": out / f"sft_seed{seed}" / "merged",
             "grpo": out / f"seed{seed}" / "final"}[arm]
    return model, None, templates


def arm_form(arm: str, form: str) -> str:
    """The form an arm answers in: the trained arms the run's (--answer-form); the base
    model and the teacher whole kernels, the form they were made for. In the edit form the
    base model asked for edits writes few that apply, and its correctness would set a bar
    for the forgetting line that the untouched model does not hold itself to."""
    return form if arm in ("control", "grpo") else "code"


def run_eval(out: Path, arm: str, seed: int, plan: dict, templates: Path | None = None) -> None:
    """One arm's answers for one seed, every split, as one file (the stage's resume point)."""
    path = out / "eval" / f"{arm}_seed{seed}.json"
    if path.exists():
        return
    model, sampling, templates = arm_model(out, arm, seed, templates)
    n = TEACHER_PER_TASK if arm == "teacher" else plan["per_cell"]
    form = arm_form(arm, plan.get("answer_form", "code"))
    if form != plan.get("answer_form", "code") and arm == "base":
        templates = None  # perfgym's own prompts: the edit form's ask for edits
    sampled = learning.sample(model, list(TASKS), n, seed, sampling, templates,
                              config=eval_config(), opened=form == "code")
    triples = with_edit_errors(sampled, form)
    answers = [(t, a) for t, a, _ in triples]
    edit_errors = {(t, a): e for t, a, e in triples if e}
    train = [a for a in answers if a[0] in TRAIN_TASKS]
    held = [a for a in answers if a[0] in HELDOUT_TASKS]
    k = min(n, HELDOUT_SIZES_PER_CELL)
    resized = [a for t in TRAIN_TASKS for a in [x for x in train if x[0] == t][:k]]
    rows = []
    for split, items, which in (("train", train, "train"), ("heldout_sizes", resized, "heldout"),
                                ("heldout_task", held, "train")):
        rows += [dict(record(arm, seed, split, t, a, o),
                      **({"edit_error": edit_errors[t, a]} if (t, a) in edit_errors else {}))
                 for (t, a), o in zip(items, judge(items, which,
                                                   timeouts=plan.get("measure_timeouts", {})))]
    write_json(path, {"arm": arm, "seed": seed, "model": str(model), "records": rows})


def run_baselines(out: Path, plan: dict) -> None:
    """Each task's naive kernel timed again, uncached, at every size the evaluations judge it at,
    and put in the cache in place of the copy the pilot and data stages used: every arm is then
    judged against a baseline timed on the machine at rest, just before the evaluations (one
    timed while the machine was busy moves the 1.1x line for every arm). The cached and the new
    medians are kept side by side in baselines.json. (Since evaluate.BASELINE_MAX_AGE the cache
    serves a baseline for 5 minutes: the evaluations after that time their own, near their
    answers, and `before` is a new timing once the cached one is older.)"""
    from perfgym.evaluate import baseline, retime_baseline
    from perfgym.tasks import get_task
    timeouts, rows = plan.get("measure_timeouts", {}), []
    for name in TASKS:
        task = get_task(name)
        cfg = eval_config(measure=True, timeout=timeouts.get(name))
        sizes = task.sizes("train") + (task.sizes("heldout") if name in TRAIN_TASKS else [])
        for size in sizes:
            before = baseline(task, size, cfg)  # the cache's copy, as the evaluations take it
            for _ in range(3):  # a timing disturbed by the host is not kept: time it again
                fresh = retime_baseline(task, size, cfg)
                if fresh.ok and not fresh.disturbed:
                    break
            old, new = (o.timing.median if o.ok and o.timing else None for o in (before, fresh))
            rows.append({"task": name, "size": size, "cached_median_s": old,
                         "median_s": new, "status": fresh.status.value,
                         "disturbed": fresh.disturbed,
                         "cached_over_new": round(old / new, 3) if old and new else None})
            log(f"baseline {name} {size}: {old} -> {new}")
    write_json(out / "baselines.json", {"baselines": rows})


# --- statistics -------------------------------------------------------------------------------

def cells_of(rows: list[dict], arm: str, split: str, key: str = "faster") -> dict:
    """(seed, task) -> the arm's values of `key` in that split."""
    found: dict = {}
    for r in rows:
        if r["arm"] == arm and r["split"] == split:
            found.setdefault((r["seed"], r["task"]), []).append(float(r[key]))
    return found


def clustered_bootstrap(arms: list[dict], reps: int = REPS, seed: int = 0):
    """Bootstrap replicates of each arm's mean (metrics.arm_mean: over tasks of the mean over
    seeds of each cell's mean), clustered by task and by seed: a replicate draws the tasks
    with replacement, then for each drawn task its seeds with replacement, then the samples of
    each drawn (seed, task) cell with replacement. The arms (dicts of (seed, task) -> values)
    are drawn together, on the cells they share, so a difference of two arms' replicates is
    paired by task and seed. Returns an array of shape (len(arms), reps)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    common = set.intersection(*(set(a) for a in arms))
    tasks = sorted({t for _, t in common})
    seeds_of = [sorted(s for s, tt in common if tt == t) for t in tasks]
    n_seeds = np.array([len(s) for s in seeds_of])
    width = int(n_seeds.max())
    # every replicate's drawn tasks (reps x T) and, per drawn task, its drawn seeds (x S)
    task_at = rng.integers(0, len(tasks), (reps, len(tasks)))
    k = n_seeds[task_at][..., None]
    seed_at = np.minimum((rng.random((reps, len(tasks), width)) * k).astype(int), k - 1)
    used = np.arange(width) < k
    out = np.empty((len(arms), reps))
    for i, arm in enumerate(arms):
        cells = [[np.asarray(arm[(s, t)], dtype=float) for s in ss]
                 for t, ss in zip(tasks, seeds_of)]
        n = np.zeros((len(tasks), width), dtype=int)
        values = np.zeros((len(tasks), width, max(len(c) for row in cells for c in row)))
        for t, row in enumerate(cells):
            for j, c in enumerate(row):
                n[t, j], values[t, j, :len(c)] = len(c), c
        size = n[task_at[..., None], seed_at]  # each drawn cell's sample count
        pick = np.minimum((rng.random(size.shape + (values.shape[2],)) * size[..., None])
                          .astype(int), np.maximum(size, 1)[..., None] - 1)
        drawn = values[task_at[..., None, None], seed_at[..., None], pick]
        in_cell = np.arange(values.shape[2]) < size[..., None]
        means = (drawn * in_cell).sum(-1) / np.maximum(size, 1)
        out[i] = ((means * used).sum(-1) / n_seeds[task_at]).mean(-1)
    return out


def clustered_interval(cells: dict, reps: int = REPS, seed: int = 0) -> tuple:
    """(mean, low, high): metrics.arm_mean and its 95% clustered bootstrap interval."""
    import numpy as np

    from perfgym.metrics import arm_mean
    low, high = np.quantile(clustered_bootstrap([cells], reps, seed)[0], [0.025, 0.975])
    return arm_mean(cells), float(low), float(high)


def ci_clustered(rows: list[dict], reps: int = REPS) -> dict:
    """Per arm and split: the share faster and the mean ln speedup with clustered intervals;
    the train split's share also at the arm's top level (faster, faster_low, faster_high)."""
    ci: dict = {}
    for arm in [a for a in ARMS if any(r["arm"] == a for r in rows)]:
        ci[arm] = {}
        for split in SPLITS:
            faster = cells_of(rows, arm, split)
            if not faster:
                continue
            f, fl, fh = clustered_interval(faster, reps)
            m, ml, mh = clustered_interval(cells_of(rows, arm, split, "log_speedup"), reps)
            ci[arm][split] = {"samples": sum(map(len, faster.values())), "faster": f,
                              "faster_low": fl, "faster_high": fh, "mean_log_speedup": m,
                              "mean_log_speedup_low": ml, "mean_log_speedup_high": mh}
        if "train" in ci[arm]:
            ci[arm].update({k: ci[arm]["train"][k] for k in ("samples", "faster", "faster_low",
                                                            "faster_high")})
    return ci


def shares_before_confirmation(rows: list[dict], reps: int = REPS) -> dict:
    """Per arm and split, the share faster by the evaluations' own verdict (`faster_first`,
    learning_confirm.apply) with its clustered interval: what the confirmation took away."""
    first = [{**r, "faster": r.get("faster_first", r["faster"])} for r in rows]
    shares: dict = {}
    for arm in [a for a in ARMS if any(r["arm"] == a for r in rows)]:
        for split in SPLITS:
            if cells := cells_of(first, arm, split):
                f, fl, fh = clustered_interval(cells, reps)
                shares.setdefault(arm, {})[split] = {"faster": f, "faster_low": fl,
                                                     "faster_high": fh}
    return shares


def comparisons(rows: list[dict], reps: int = REPS) -> dict:
    """Differences in the share faster, paired by task and seed (clustered bootstrap)."""
    import numpy as np
    result = {}
    for a, b in (("grpo", "control"), ("grpo", "base"), ("control", "base")):
        for split in SPLITS:
            x, y = cells_of(rows, a, split), cells_of(rows, b, split)
            if not set(x) & set(y):
                continue
            draws = clustered_bootstrap([x, y], reps)
            diff = draws[0] - draws[1]
            low, high = np.quantile(diff, [0.025, 0.975])
            common = set(x) & set(y)
            result[f"{a}-{b}:{split}"] = {
                "diff": float(np.mean([np.mean(x[k]) for k in common])
                              - np.mean([np.mean(y[k]) for k in common])),
                "low": float(low), "high": float(high)}
    return result


def correctness(rows: list[dict], changed_only: bool = False) -> dict:
    """arm -> task -> the share of its answers correct at every size (training tasks at the
    train split, held-out tasks at the heldout_task split); `changed_only`: correct and not
    the naive kernel handed back (the base model's correctness on dot, prefix_sum and
    histogram was all copies: a student that tries a change and fails loses it)."""
    result: dict = {}
    for r in rows:
        if (r["split"] == "train") != (r["task"] in TRAIN_TASKS) or r["split"] == "heldout_sizes":
            continue
        cell = result.setdefault(r["arm"], {}).setdefault(r["task"], [0, 0])
        cell[0] += r["status"] == "OK" and not (changed_only and r.get("naive_copy"))
        cell[1] += 1
    return {arm: {t: ok / n for t, (ok, n) in sorted(tasks.items())}
            for arm, tasks in result.items()}


def forgetting(correct: dict, arms: tuple = ("control", "grpo"),
               changed: dict | None = None) -> list[dict]:
    """The tasks whose correctness fell more than FORGETTING below the base model's; with
    `changed` (correctness(changed_only=True)), each says how much of either was correct
    answers that changed the naive kernel."""
    base = correct.get("base", {})
    return [{"arm": arm, "task": t, "correct": c, "base": base[t],
             **({"correct_changed": changed[arm][t], "base_changed": changed["base"][t]}
                if changed else {})}
            for arm in arms for t, c in correct.get(arm, {}).items()
            if t in base and c < base[t] - FORGETTING - 1e-12]


def faster_by_task(rows: list[dict], arm: str, split: str = "train") -> dict:
    """task -> {faster, samples, seeds (with a faster sample), distinct (faster kernels)}."""
    from perfgym.extract import normalize
    result: dict = {}
    for r in rows:
        if r["arm"] != arm or r["split"] != split:
            continue
        cell = result.setdefault(r["task"], {"faster": 0, "samples": 0, "seeds": set(),
                                             "distinct": set()})
        cell["samples"] += 1
        if r["faster"]:
            cell["faster"] += 1
            cell["seeds"].add(r["seed"])
            cell["distinct"].add(normalize(r["code"]))
    return {t: {**c, "seeds": sorted(c["seeds"]), "distinct": len(c["distinct"])}
            for t, c in sorted(result.items())}


def faster_examples(rows: list[dict], arm: str = STUDENT) -> dict:
    """task -> the faster kernel the arm wrote most often (on the training tasks at their train
    sizes, on a held-out task at its own): what was learned, not the one lucky sample; ties go
    to the larger speedup. With how often and from which seeds."""
    from perfgym.extract import normalize
    found: dict = {}
    for r in rows:
        if r["arm"] != arm or not r["faster"] or r["split"] == "heldout_sizes":
            continue
        kernel = found.setdefault(r["task"], {}).setdefault(normalize(r["code"]), {
            "samples": 0, "seeds": set(), "speedup": 0.0, "code": r["code"]})
        kernel["samples"] += 1
        kernel["seeds"].add(r["seed"])
        kernel["speedup"] = max(kernel["speedup"], r["speedup"] or 0.0)
    return {task: {**best, "seeds": sorted(best["seeds"])}
            for task, kernels in sorted(found.items())
            for best in [max(kernels.values(), key=lambda k: (k["samples"], k["speedup"]))]}


def examples_markdown(examples: dict, arm: str = STUDENT) -> str:
    """One faster kernel per task, as the docs page shows them."""
    if not examples:
        return f"No faster kernel from the {arm} arm."
    parts = []
    for task, e in examples.items():
        held = " (held out)" if task in HELDOUT_TASKS else ""
        seeds = ", ".join(map(str, e["seeds"]))
        parts.append(f"**{task}**{held}: {e['samples']} faster samples of this kernel (seeds "
                     f"{seeds}), up to {e['speedup']:.2f}× naive over the train sizes\n\n"
                     f"```c\n{e['code'].strip()}\n```")
    return "\n\n".join(parts)


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _share(cell: dict) -> float:
    return cell["faster"] / cell["samples"] if cell.get("samples") else 0.0


def goal_check(rows: list[dict], ci: dict, correct: dict, forgot: list[dict],
               sft_seeds: list[int], wall_seconds: float) -> list[tuple[bool, str]]:
    """Issue 52's goal, one (passed, line) each, with its figure."""
    s, b = ci.get(STUDENT, {}), ci.get("base", {}).get("faster")
    if s.get("faster") is None or b is None:
        first = (False, "no samples")
    else:
        first = (s["faster"] >= GOAL_SHARE and s["faster_low"] > b,
                 f"{_pct(s['faster'])} [{_pct(s['faster_low'])}, {_pct(s['faster_high'])}], "
                 f"base {_pct(b)}")
    wide = [t for t, c in faster_by_task(rows, STUDENT).items()
            if len(c["seeds"]) >= GOAL_TASK_SEEDS]
    mine = faster_by_task(rows, STUDENT, "heldout_task")
    base = faster_by_task(rows, "base", "heldout_task")
    held = {t: (mine.get(t, {}), base.get(t, {})) for t in HELDOUT_TASKS}
    above = [t for t, (x, y) in held.items() if x.get("samples") and _share(x) > _share(y)]
    fell = "; ".join(f"{f['arm']} {f['task']} {_pct(f['correct'])} vs {_pct(f['base'])}"
                     + (f" (changed and correct: {_pct(f['correct_changed'])} vs "
                        f"{_pct(f['base_changed'])})" if "base_changed" in f else "")
                     for f in forgot)
    done = sorted({r["seed"] for r in rows if r["arm"] == STUDENT} & set(sft_seeds))
    return [
        (first[0], f"student ({STUDENT}) faster on the training tasks >= {GOAL_SHARE:.0%}, "
                   f"its 95% lower bound (clustered) above the base model's share: {first[1]}"),
        (len(wide) >= GOAL_TASKS, f">= {GOAL_TASKS} training tasks with faster samples from "
                                  f">= {GOAL_TASK_SEEDS} seeds: {len(wide)} "
                                  f"({', '.join(wide) or 'none'})"),
        (bool(above), "above the base model on a held-out task: " + "; ".join(
            f"{t} {_pct(_share(x))} vs {_pct(_share(y))}" for t, (x, y) in held.items())),
        (bool(correct.get(STUDENT)) and not forgot,
         f"no task's correctness more than {FORGETTING:.0%} below the base model's: "
         f"{fell or 'none fell'}"),
        (len(done) >= GOAL_SEEDS, f">= {GOAL_SEEDS} independent seeds (own SFT and GRPO): "
                                  f"{len(done)} ({', '.join(map(str, done)) or 'none'})"),
        (wall_seconds <= BUDGET_SECONDS,
         f"the whole experiment <= 4 h: {wall_seconds / 3600:.2f} h"),
    ]


# --- report -----------------------------------------------------------------------------------

def per_sample(out: Path) -> list[dict]:
    """Every evaluation's records, each copy of the naive kernel counted as one by the copy
    check of the perfgym that reports (`recheck_copy`)."""
    rows = []
    for path in sorted((out / "eval").glob("*.json")):
        rows += [recheck_copy(r) for r in json.loads(path.read_text())["records"]]
    return rows


def recheck_copy(row: dict) -> dict:
    """The record with the copy check of the code that reports: a run's arms are evaluated
    over hours, in stages a session may resume at a later commit, and a copy check that grew
    (braces around a one-statement body, 3ae6d87) must count every arm's copies alike. A copy
    is the naive kernel: not faster, speedup 1 (as the gym pays it). `recounted` marks a
    record this changed."""
    if row.get("naive_copy") or row["status"] != "OK" or not row.get("code") \
            or not naive_copy(row["task"], row["code"]):
        return row
    return {**row, "naive_copy": True, "faster": False, "speedup": 1.0, "log_speedup": 0.0,
            "recounted": True}


def peak_rss(rss: dict) -> dict:
    """arm -> the largest peak RSS (MB) of the children that made it: its SFT, GRPO and
    evaluation processes (each child's own ru_maxrss)."""
    owners = {"base": ("eval_base_",), "control": ("sft_", "eval_control_"),
              "grpo": ("grpo_", "eval_grpo_"), "teacher": ("eval_teacher_",),
              "pilot": ("pilot",)}
    return {arm: max(v for k, v in rss.items() if k.startswith(prefixes))
            for arm, prefixes in owners.items() if any(k.startswith(prefixes) for k in rss)}


def table(ci: dict, correct: dict) -> str:
    label = {"base": "base model", "control": "SFT (= the LR-0 control)",
             "grpo": "SFT, then GRPO (speed reward)", "teacher": "teacher (the coder)"}

    def share(c: dict, split: str) -> str:
        e = c.get(split)
        return "-" if not e else (f"{e['faster']:.1%} [{e['faster_low']:.1%}, "
                                  f"{e['faster_high']:.1%}]")
    lines = [("| arm | samples | faster, training tasks (every train size) [95% CI, "
              "clustered] | held-out sizes | held-out tasks | mean ln speedup | OK, training "
              "tasks |"), "|---|---|---|---|---|---|---|"]
    for arm, c in ci.items():
        train = c.get("train", {})
        ok = [v for t, v in correct.get(arm, {}).items() if t in TRAIN_TASKS]
        log_mean = f"{train['mean_log_speedup']:+.2f}" if train else "-"
        ok_share = f"{sum(ok) / len(ok):.0%}" if ok else "-"
        lines.append(f"| {label[arm]} | {train.get('samples', '-')} | {share(c, 'train')} | "
                     f"{share(c, 'heldout_sizes')} | {share(c, 'heldout_task')} | {log_mean} | "
                     f"{ok_share} |")
    return "\n".join(lines)


def task_table(correct: dict, faster: dict) -> str:
    """Per task and arm: correct share (every size) and faster samples of all."""
    arms = list(faster)
    lines = ["| task | " + " | ".join(f"{a}: OK, faster" for a in arms) + " |",
             "|---|" + "---|" * len(arms)]
    for task in TASKS:
        cells = []
        for arm in arms:
            c = faster[arm].get(task)
            ok = correct.get(arm, {}).get(task)
            cells.append("-" if c is None or ok is None else
                         f"{ok:.0%}, {c['faster']}/{c['samples']}")
        lines.append(f"| {task}{' (held out)' if task in HELDOUT_TASKS else ''} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def confirmations(out: Path) -> dict | None:
    """The confirm stage's file (learning_confirm), None for a run that has none."""
    path = out / "confirm.json"
    return json.loads(path.read_text()) if path.exists() else None


def run_confirm(out: Path, plan: dict) -> None:
    """Every kernel an evaluation counted faster timed again beside the naive kernel, in
    interleaved rounds at every size of its split (learning_confirm), with the measure's
    settings and each task's own timeout."""
    timeouts = plan.get("measure_timeouts", {})
    learning_confirm.confirm(per_sample(out), out / "confirm.json",
                             lambda name: eval_config(measure=True, timeout=timeouts.get(name)),
                             log)


def summarize(out: Path, seeds: list[int], plan: dict, wall: dict, rss: dict,
              reps: int = REPS) -> dict:
    confirmed = confirmations(out)
    # the seeds asked for (--seeds 1,2 of a run whose seed 3 is under way); the teacher is
    # evaluated once, under the first seed of the run
    asked = [r for r in per_sample(out) if r["seed"] in seeds or r["arm"] == "teacher"]
    rows = learning_confirm.apply(asked, confirmed)
    ci = ci_clustered(rows, reps)
    correct = correctness(rows)
    changed = correctness(rows, changed_only=True)
    forgot = forgetting(correct, changed=changed)
    data = json.loads((out / "data.json").read_text()) if (out / "data.json").exists() else {}
    goals = goal_check(rows, ci, correct, forgot, seeds, sum(wall.values()))
    return {
        "measure": "share of samples faster than the naive kernel: correct at every size of "
                   "the split, the geometric mean of the speedups over the sizes >= 1.1, faster "
                   "by the evaluator's bound where it gives one, not the naive kernel handed "
                   "back, and confirmed so by interleaved rounds beside the naive kernel at "
                   "every size (learning_confirm); secondary: mean ln(speedup), failures at "
                   "ln(0.1); mean over tasks of the mean over seeds; 95% bootstrap clustered "
                   "by task and by seed",
        "train_tasks": list(TRAIN_TASKS), "heldout_tasks": list(HELDOUT_TASKS),
        "confirmation": {"done": confirmed is not None,
                         "by_split": learning_confirm.summary(rows),
                         "before": shares_before_confirmation(rows, reps)},
        "ci_clustered": ci, "comparisons": comparisons(rows, reps), "correctness": correct,
        "correctness_changed": changed, "forgetting": forgot, "faster_examples": faster_examples(rows),
        "heldout_forms": heldout_forms(rows),
        "faster_by_task": {arm: {**faster_by_task(rows, arm),
                                 **faster_by_task(rows, arm, "heldout_task")} for arm in ci},
        "goal": [{"passed": p, "line": line} for p, line in goals],
        "sft_data": {k: v for k, v in data.items() if k != "skipped"},
        "evaluated": sorted(f.stem for f in (out / "eval").glob("*.json")),
        "complete": all((out / "eval" / f"{a}_seed{s}.json").exists()
                        for a in ("base", "control", "grpo") for s in seeds),
        "pilot": {k: v for k, v in plan.items() if k != "records"},
        "wall_seconds": wall, "peak_rss_mb": peak_rss(rss), "peak_rss_mb_by_child": rss,
        "machines": stage_machines(out),
        "baselines": (json.loads((out / "baselines.json").read_text())["baselines"]
                      if (out / "baselines.json").exists() else None),
        "settings": {"sft_seeds": seeds, "heldout_tasks": list(HELDOUT_TASKS),
                     "train_tasks": list(TRAIN_TASKS), "sft": SFT, "grpo": GRPO,
                     "grpo_task_weights": (json.loads((out / "grpo_weights.json").read_text())
                                           if (out / "grpo_weights.json").is_file() else {}),
                     "sft_task_weights": (json.loads((out / "sft_weights.json").read_text())
                                          if (out / "sft_weights.json").is_file() else {}),
                     "grpo_guide": (json.loads((out / "grpo_guide.json").read_text())
                                    if (out / "grpo_guide.json").is_file() else []),
                     "sft_line_twins": kept_setting(out, "sft_line_twins", []),
                     "sft_passes": kept_setting(out, "sft_passes", 2),
                     "grpo_beta": kept_setting(out, "grpo_beta", 0.0),
                     "eval_sampling": learning.EVAL_SAMPLING,
                     "measure_overrides": MEASURE_OVERRIDES,
                     "measure_timeouts": plan.get("measure_timeouts"),
                     "teacher_per_task": TEACHER_PER_TASK, "pilot_per_task": PILOT_PER_TASK,
                     "max_pairs_per_task": MAX_PAIRS_PER_TASK, "mix_per_task": MIX_PER_TASK,
                     "prompts_dir": plan.get("prompts_dir"),
                     "prompts_sha256": plan.get("prompts_sha256"),
                     "answer_form": plan.get("answer_form", "code")},
        "per_sample": rows}


SECTION_REDUCTION = re.compile(r"reduction\s*\([^:()]+:[^)]*\[[^]]*:[^]]*\]")


def heldout_forms(rows: list[dict]) -> dict:
    """Per arm, its answers to the held-out tasks that carry each lever's form, and how many
    of those are correct: the pairs' `((long) i)` index (--plain-casts takes it out of the
    SFT data) and an array-section reduction (colsum's clause, histogram's fast form)."""
    forms = {"parenthesized_cast": PARENTHESIZED_CAST, "section_reduction": SECTION_REDUCTION}
    result = {}
    for arm in sorted({r["arm"] for r in rows}):
        mine = [r for r in rows if r["arm"] == arm and r["split"] == "heldout_task"]
        result[arm] = {"answers": len(mine)}
        for name, pattern in forms.items():
            having = [r for r in mine if pattern.search(r.get("code") or "")]
            result[arm][name] = {"answers": len(having),
                                 "correct": sum(r["status"] == "OK" for r in having),
                                 "by_task": {t: sum(r["task"] == t for r in having)
                                             for t in HELDOUT_TASKS}}
    return result


def stage_machines(out: Path) -> dict:
    """Each stage's CPU, and `kinds`: how many CPU kinds the run spans (1 is comparable)."""
    path = out / "machines.json"
    from results_by_machine import KIND_FLAGS
    by_stage = json.loads(path.read_text()) if path.exists() else {}
    # (stages recorded before 72d2d7e list every ISA flag: a kind is its KIND_FLAGS alone; a
    # stage that recorded no CPU generation is a kind of its own, as in every results file)
    kinds = {(m["cpu"], m.get("family"), tuple(f for f in m["isa"] if f in KIND_FLAGS))
             for m in by_stage.values()}
    return {"kinds": len(kinds), "by_stage": by_stage}


def report(out: Path, seeds: list[int], plan: dict, wall: dict, rss: dict,
           json_path: Path | None, reps: int = REPS) -> str:
    result = summarize(out, seeds, plan, wall, rss, reps)
    text = table(result["ci_clustered"], result["correctness"]) + "\n\n" + task_table(
        result["correctness"], result["faster_by_task"])
    (out / "table.md").write_text(text + "\n")
    (out / "examples.md").write_text(examples_markdown(result["faster_examples"]) + "\n")
    if json_path is not None:
        write_json(json_path, result)
    goal = [f"{'PASS' if g['passed'] else 'FAIL'}  {g['line']}" for g in result["goal"]]
    if not result["confirmation"]["done"]:
        text += ("\n\nWARNING: no confirm.json: \"faster\" is the evaluations' own verdict, "
                 "not timed again beside the naive kernel (run with --confirm-only)")
    if result["machines"]["kinds"] > 1:
        text += (f"\n\nWARNING: the stages ran on {result['machines']['kinds']} CPU kinds "
                 "(machines.json); timings across kinds are not comparable")
    return text + "\n\nGoal (issue 52):\n" + "\n".join(goal)


# --- driver -----------------------------------------------------------------------------------

def run_child(argv: list[str]) -> float:
    """Run one stage in a child process; its own peak RSS in MB: the high-water mark of its
    address space (VmHWM), read while it runs. Not ru_maxrss: a forked child's starts at
    this driver's RSS at the fork, whatever the child then uses."""
    proc = subprocess.Popen(argv)
    peak_kb = 0
    while proc.poll() is None:
        peak_kb = max(peak_kb, _high_water_kb(proc.pid))
        time.sleep(0.05)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[2:])} failed (exit {proc.returncode})")
    return round(peak_kb / 1024, 1)


def _high_water_kb(pid: int) -> int:
    """VmHWM of a running process, 0 once it is gone (or a zombie: no address space)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/learning_speed")
    ap.add_argument("--pairs", default="benchmarks/results/teacher_pairs.jsonl",
                    help="perfgym pairs from-runs over the teacher's search run stores")
    ap.add_argument("--runs", nargs="*", default=[], help="those run stores (or another "
                    "run's kept sft_data.jsonl): the teacher's correct answers fill the "
                    "anti-forgetting mix where the base has none")
    ap.add_argument("--rewrite-pairs", type=int, default=0, metavar="N",
                    help="add up to N textbook rewrites of each training task's naive kernel "
                         "to the SFT data, each kept when faster (default 0: none)")
    ap.add_argument("--rewrite-form", choices=REWRITE_FORMS, default="printed",
                    help="printed: the climb's rewrites, the kernel printed again; edit: only "
                         "the pragma lines added to the naive kernel's text; edit-if: those "
                         "lines with the work bound as the thread pragma's if clause; "
                         "edit-if-loop: with the threaded loop's own bound (if(M > 16))")
    ap.add_argument("--mix-copies", type=int, default=0, metavar="N",
                    help="add up to N of the base model's correct answers that are the naive "
                         "kernel handed back, per training task, to the anti-forgetting mix "
                         "(default 0: none)")
    ap.add_argument("--mix-naive", type=int, default=0, metavar="N",
                    help="add each training task's naive kernel, N times, as an answer to the "
                         "anti-forgetting mix (default 0: none)")
    ap.add_argument("--rename-accumulators", action="store_true",
                    help="rename each reduction's scalar in the SFT answers (sum -> acc, "
                         "total, ...; judged again), so no one name is the clause's")
    ap.add_argument("--plain-casts", action="store_true",
                    help="write each ((long) i) of the SFT answers as (long) i, the naive "
                         "kernels' form (judged again)")
    ap.add_argument("--hand-back-at-loop", action="store_true",
                    help="with --answer-form edits: write each handed-back copy (--mix-copies, "
                         "--mix-naive) as the no-change edit of the kernel's loop line, where "
                         "the student's pragma edits anchor")
    ap.add_argument("--anchor-body", nargs="?", const="loop", choices=("loop", "leaf"),
                    default=None,
                    help="with --answer-form edits: a pragma edit's and a hand-back's block "
                         "holds its loop's body with the loop line, so the student writes "
                         "the body (a reduction's sum +=, a scan's y[i] = sum) before the "
                         "pragma; leaf: only where the loop holds no loop (nests keep the "
                         "loop line alone)")
    ap.add_argument("--prompts", default=None, metavar="DIR",
                    help="prompt templates overriding perfgym's for the base model and the "
                         "student (pilot, SFT data, GRPO, evaluations; not the teacher), "
                         "files named as src/perfgym/prompts/templates/ names them")
    ap.add_argument("--answer-form", choices=ANSWER_FORMS, default="code",
                    help="code: the student's answers are whole kernels, opened; edits: "
                         "SEARCH/REPLACE blocks of the naive kernel its prompt shows, asked "
                         "for by benchmarks/prompt_variants/edits/ unless --prompts")
    ap.add_argument("--grpo-weights", default="", metavar="TASK=K,...",
                    help="GRPO meets TASK K times a cycle of the training tasks (1 each "
                         "unless named): more of its groups for tasks the student forgets")
    ap.add_argument("--grpo-guide", default="", metavar="TASK,...",
                    help="GRPO puts the SFT data's fastest answer to TASK in place of one "
                         "sample of each of its groups: a group of the same wrong answer "
                         "then differs")
    ap.add_argument("--sft-weights", default="", metavar="TASK=K,...",
                    help="SFT's data holds each record of TASK K times (1 unless named), in "
                         "as many steps: more of its sequences for tasks the student forgets")
    ap.add_argument("--sft-line-twins", default="", metavar="TASK,...",
                    help="with --anchor-body, SFT's data holds each record of TASK whose "
                         "blocks are anchored through a loop's body twice: also anchored on "
                         "the loop line alone, as a nest's pragma is")
    ap.add_argument("--grpo-beta", type=float, default=0.0, metavar="B",
                    help="GRPO's KL coefficient (default 0): the update pays B per unit of "
                         "KL to the SFT weights (the model under GRPO's LoRA adapter)")
    ap.add_argument("--sft-passes", type=int, default=2, metavar="K",
                    help="SFT's steps make K passes over the SFT data's records (before "
                         "--sft-weights and --sft-line-twins; default 2, up to 96 sequences "
                         "a seed, the cap K/2 times that)")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--steps", type=int, default=GRPO_STEPS, help="GRPO steps per seed")
    ap.add_argument("--json", default=None)
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--report-only", action="store_true")
    only.add_argument("--confirm-only", action="store_true", help="run no stage but the "
                    "confirmation of the faster answers (a run reported before it existed), "
                    "then report")
    ap.add_argument("--keep", default=str(KEEP_DIR), help="where the run's small files are "
                    "kept after each stage and restored from on a new machine ('' for "
                    "nowhere); commit it to go on in a later session")
    ap.add_argument("--pilot", action="store_true", help=argparse.SUPPRESS)  # children
    ap.add_argument("--sft", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--grpo", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--eval", nargs=2, metavar=("ARM", "SEED"), help=argparse.SUPPRESS)
    ap.add_argument("--baselines", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--confirm", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def templates_of(args: argparse.Namespace) -> Path | None:
    """The --prompts directory, absolute; else the edit form's prompts (--answer-form edits)
    or None: perfgym's own templates."""
    if args.prompts:
        return Path(args.prompts).resolve()
    return EDIT_PROMPTS if args.answer_form == "edits" else None


def is_child(args: argparse.Namespace) -> bool:
    """One stage, run by the driver in a child process."""
    return bool(args.pilot or args.sft is not None or args.grpo is not None or args.eval
                or args.baselines or args.confirm)


def check_same_run(out: Path, keep_dir: Path | None) -> None:
    """The kept files are this run's: where `out` and `keep_dir` both hold a pilot, the two are
    the same file. Otherwise a restore would bring another run's evaluations and confirmations
    into this one (a `--report-only` of a new run, given the default --keep, reported the hint
    run's teacher and confirmations as its own), and each stage's keep would write over that
    run's committed files."""
    if keep_dir is None:
        return
    here, kept = out / "pilot.json", keep_dir / "pilot.json"
    if here.is_file() and kept.is_file() and here.read_bytes() != kept.read_bytes():
        raise InputError(f"{keep_dir} keeps another run than {out} (their pilot.json differ): "
                         f"pass this run's --keep, or --keep '' for none")


def data_records(out: Path, keep_dir: Path | None = None) -> int | None:
    """The SFT records of a run whose data stage has run (here or in its kept files)."""
    for where in (out, keep_dir):
        if where is not None and (where / "sft_data.jsonl").is_file():
            return len((where / "sft_data.jsonl").read_text().splitlines())
    return None


def check_inputs(args: argparse.Namespace, out: Path, keep_dir: Path | None = None) -> list[int]:
    """The seeds; an InputError names the first bad input."""
    from perfgym.store import RunStore
    seeds = parse_seeds(args.seeds)
    if args.steps < 1:
        raise InputError(f"--steps is at least 1, got {args.steps}")
    parse_weights(args.grpo_weights)
    parse_weights(args.sft_weights, "--sft-weights")
    parse_guide(args.grpo_guide)
    parse_guide(args.sft_line_twins, "--sft-line-twins")
    if not 0 <= args.grpo_beta < 10:
        raise InputError(f"--grpo-beta is in [0, 10), got {args.grpo_beta}")
    if args.sft_passes < 1:
        raise InputError(f"--sft-passes is at least 1, got {args.sft_passes}")
    if plan_budget(len(seeds), args.steps, sft_passes=args.sft_passes,
                   sft_records=data_records(out, keep_dir))["per_cell"] < 1:
        raise InputError(f"{len(seeds)} seeds of {args.steps} GRPO steps do not fit in "
                         f"{BUDGET_SECONDS / 3600:.0f} hours: give fewer")
    if is_child(args):
        return seeds  # a child of the run: the driver checked the rest
    if args.sft_line_twins and not args.anchor_body:
        raise InputError("--sft-line-twins twins answers anchored through a loop's body: "
                         "give --anchor-body too")
    if args.rewrite_pairs < 0:
        raise InputError("--rewrite-pairs is 0 or more")
    if args.mix_copies < 0:
        raise InputError("--mix-copies is 0 or more")
    if args.mix_naive < 0:
        raise InputError("--mix-naive is 0 or more")
    if args.grpo_guide and args.answer_form != "edits":
        raise InputError("--grpo-guide puts edit answers in GRPO's groups: give --answer-form "
                         "edits")
    if args.hand_back_at_loop and args.answer_form != "edits":
        raise InputError("--hand-back-at-loop writes edit answers: give --answer-form edits")
    if args.anchor_body and args.answer_form != "edits":
        raise InputError("--anchor-body writes edit answers: give --answer-form edits")
    check_templates(args.prompts)
    check_same_run(out, keep_dir)
    if args.report_only or args.confirm_only:
        if not (out / "pilot.json").is_file() and not (keep_dir and
                                                       (keep_dir / "pilot.json").is_file()):
            raise InputError(f"nothing to report in {out}: no pilot.json")
        return seeds
    if not Path(args.pairs).is_file():
        raise InputError(f"no pairs at {args.pairs}: perfgym pairs from-runs RUN_DIRS --out "
                         f"{args.pairs} first")
    from perfgym.train.pairs import read_pairs
    try:
        tasks = {p.task for p in read_pairs(args.pairs)}
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if not tasks & set(TRAIN_TASKS):
        raise InputError(f"{args.pairs} holds no pair of a training task "
                         f"({', '.join(TRAIN_TASKS)})")
    for run in args.runs:
        if Path(run).is_file():
            check_kept_data(Path(run))
        elif not RunStore.exists(Path(run)):
            raise InputError(f"--runs {run} holds no search run (no run store) and is no "
                             f"kept sft_data.jsonl")
    return seeds


def check_kept_data(path: Path) -> None:
    """An InputError unless `path` (a --runs file) is a kept sft_data.jsonl with at least one
    teacher answer: any other file would give no mix, silently."""
    try:
        answers = kept_teacher_answers(path)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError):
        raise InputError(f"--runs {path} is neither a run store nor a kept sft_data.jsonl "
                         f"(one JSON record a line)") from None
    if not answers:
        raise InputError(f"--runs {path} holds no teacher answer (no mix_teacher record); "
                         f"give the run stores or another run's kept sft_data.jsonl")


def check_templates(prompts: str | None) -> None:
    """An InputError unless `prompts` (--prompts) is a directory that overrides at least one
    of perfgym's templates: a misnamed file would leave every prompt as it was, silently."""
    if prompts is None:
        return
    shipped = {p.name for p in (shipped_prompts() / "templates").glob("*.txt")}
    if not Path(prompts).is_dir():
        raise InputError(f"--prompts {prompts} is not a directory")
    if not {p.name for p in Path(prompts).glob("*.txt")} & shipped:
        raise InputError(f"--prompts {prompts} overrides no template: name its files as "
                         "src/perfgym/prompts/templates/ does (openmp.txt, improve.txt, ...)")


def this_machine() -> dict:
    """The CPU a stage ran on: its kind, as every results file names one."""
    from results_by_machine import machine
    return machine()


# What a later session needs to go on, small enough to commit (a few MB): the pilot, the SFT
# data, each evaluation's records and the stage records. Adapters and merged models are not
# (tens to hundreds of MB a seed); a seed's chain that lost them is run again (`chain_lost`).
KEPT = ("pilot.json", "data.json", "sft_data.jsonl", "baselines.json", "wall.json", "rss.json",
        "machines.json", "confirm.json", "grpo_weights.json", "sft_weights.json",
        "grpo_guide.json", "sft_line_twins.json", "sft_passes.json",
        "grpo_beta.json")


def kept_files(out: Path) -> list[Path]:
    """The run's files that `keep` copies, relative to `out`."""
    names = [Path(n) for n in KEPT if (out / n).is_file()]
    return names + sorted(p.relative_to(out) for p in (out / "eval").glob("*.json"))


def keep(out: Path, keep_dir: Path | None) -> None:
    """Copy the run's small files to `keep_dir` (committed by whoever runs it): a session ends
    at its time limit and its machine, with the run directory, may not come back."""
    if keep_dir is None:
        return
    for rel in kept_files(out):
        target = keep_dir / rel
        data = (out / rel).read_bytes()
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def restore(out: Path, keep_dir: Path | None) -> int:
    """Copy back what `keep` kept and `out` lacks (a new machine); how many files."""
    if keep_dir is None or not keep_dir.is_dir():
        return 0
    restored = 0
    for rel in kept_files(keep_dir):
        if not (out / rel).exists():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes((keep_dir / rel).read_bytes())
            restored += 1
    return restored


def chain_lost(out: Path, seed: int) -> bool:
    """A seed's chain (its SFT, the control's evaluation, GRPO from that SFT, GRPO's
    evaluation) cut short on a machine that is gone: the control was evaluated but the SFT it
    evaluated, which GRPO must start from, is not here. Training again on another machine
    gives other weights, so the control's evaluation would no longer be GRPO's LR-0 control:
    the chain runs again from its SFT."""
    evaluated = out / "eval" / f"control_seed{seed}.json"
    return (evaluated.exists() and not (out / "eval" / f"grpo_seed{seed}.json").exists()
            and not (out / f"sft_seed{seed}" / "done").exists())


def stages(args: argparse.Namespace, out: Path, seeds: list[int], wall: dict, rss: dict,
           keep_dir: Path | None = None) -> None:
    """Every stage not done yet, in order; each child's seconds, peak RSS and CPU recorded,
    and the small files kept after each stage. Per seed, one chain (base, SFT, control, GRPO,
    GRPO's evaluation) runs to its end before the next starts: a session of a few hours
    finishes chains, and a chain's arms share its machine."""
    machines_path = out / "machines.json"
    machines = json.loads(machines_path.read_text()) if machines_path.exists() else {}
    base = [sys.executable, __file__, "--out", str(out), "--seeds", args.seeds,
            "--steps", str(args.steps),
            *(["--grpo-weights", args.grpo_weights] if args.grpo_weights else []),
            *(["--sft-weights", args.sft_weights] if args.sft_weights else []),
            *(["--grpo-guide", args.grpo_guide] if args.grpo_guide else []),
            *(["--sft-line-twins", args.sft_line_twins] if args.sft_line_twins else []),
            *(["--sft-passes", str(args.sft_passes)] if args.sft_passes != 2 else []),
            *(["--grpo-beta", repr(args.grpo_beta)] if args.grpo_beta else []),
            *(["--prompts", str(templates_of(args))] if args.prompts else []),
            *(["--answer-form", args.answer_form] if args.answer_form != "code" else [])]

    def stage(name: str, done: Path | bool, flags: list[str] | None = None, work=None) -> None:
        if done is True or (isinstance(done, Path) and done.exists()):
            return
        log(name)
        started = time.monotonic()
        if flags is not None:
            rss[name] = run_child(base + flags)
            write_json(out / "rss.json", rss)
        else:
            work()
        key = name.rsplit("_seed", 1)[0]
        wall[key] = round(wall.get(key, 0.0) + time.monotonic() - started, 1)
        write_json(out / "wall.json", wall)
        machines[name] = this_machine()
        write_json(machines_path, machines)
        keep(out, keep_dir)

    def evaluation(arm: str, s: int) -> None:
        stage(f"eval_{arm}_seed{s}", out / "eval" / f"{arm}_seed{s}.json",
              ["--eval", arm, str(s)])

    if not args.confirm_only:
        chains(args, out, seeds, stage, evaluation, keep_dir)
    # last, beside nothing else: every faster answer timed again with the naive kernel; done
    # when none is left (a seed evaluated later brings new ones)
    stage("confirm", not learning_confirm.pending(per_sample(out), confirmations(out) or {}),
          ["--confirm"])


def chains(args: argparse.Namespace, out: Path, seeds: list[int], stage, evaluation,
           keep_dir: Path | None) -> None:
    """The stages before the confirmation: pilot, data, baselines, each seed's chain and the
    teacher's evaluation."""
    stage("pilot", out / "pilot.json", ["--pilot"])
    stage("data", out / "sft_data.jsonl",
          work=lambda: make_data(out, Path(args.pairs), [Path(r) for r in args.runs],
                                 rewrites_per_task=args.rewrite_pairs,
                                 rewrite_form=args.rewrite_form,
                                 copies_per_task=args.mix_copies,
                                 naive_per_task=args.mix_naive,
                                 rename_accumulators=args.rename_accumulators,
                                 plain_index_casts=args.plain_casts,
                                 templates=templates_of(args),
                                 answer_form=args.answer_form,
                                 hand_back_at_loop=args.hand_back_at_loop,
                                 anchor_body=args.anchor_body))
    # the naive kernels timed again before any evaluation, where the pilot and the data stage
    # left copies in this machine's cache (a new machine's empty cache has none: it is kept)
    stage("baselines", out / "baselines.json", ["--baselines"])
    for s in seeds:
        evaluation("base", s)
        if (out / "eval" / f"grpo_seed{s}.json").exists():
            continue  # the chain is done; its adapters need not be here
        if chain_lost(out, s):
            log(f"seed {s}: the control was evaluated on a machine that is gone with its SFT; "
                "the chain runs again from its SFT")
            for path in (out / "eval" / f"control_seed{s}.json",
                         *([keep_dir / "eval" / f"control_seed{s}.json"] if keep_dir else [])):
                path.unlink(missing_ok=True)
        stage(f"sft_seed{s}", out / f"sft_seed{s}" / "done", ["--sft", str(s)])
        evaluation("control", s)
        stage(f"grpo_seed{s}", out / f"seed{s}" / "done", ["--grpo", str(s)])
        evaluation("grpo", s)
    evaluation("teacher", seeds[0])


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = Path(args.out).resolve()
    child = is_child(args)
    keep_dir = Path(args.keep).resolve() if args.keep and not child else None
    keep_dir = None if keep_dir == out else keep_dir
    try:
        seeds = check_inputs(args, out, keep_dir)
    except InputError as exc:
        fail(str(exc))
    out.mkdir(parents=True, exist_ok=True)
    templates = templates_of(args)
    if args.pilot:
        return run_pilot(out, seeds, args.steps, templates, args.answer_form)
    if args.sft is not None:
        return run_sft(out, args.sft, parse_weights(args.sft_weights, "--sft-weights"),
                       parse_guide(args.sft_line_twins, "--sft-line-twins"), args.sft_passes)
    if args.grpo is not None:
        return run_grpo(out, args.grpo, args.steps, templates,
                        json.loads((out / "pilot.json").read_text()).get("answer_form", "code"),
                        parse_weights(args.grpo_weights), parse_guide(args.grpo_guide),
                        args.grpo_beta)
    if args.baselines:
        return run_baselines(out, json.loads((out / "pilot.json").read_text()))
    if args.confirm:
        return run_confirm(out, json.loads((out / "pilot.json").read_text()))
    if args.eval:
        return run_eval(out, args.eval[0], int(args.eval[1]),
                        json.loads((out / "pilot.json").read_text()), templates)
    if n := restore(out, keep_dir):
        log(f"restored {n} files from {keep_dir}")
    if not (args.report_only or args.confirm_only):  # these ask the model nothing
        try:
            same_prompts(out, templates)
            same_form(out, args.answer_form)
            same_weights(out, parse_weights(args.grpo_weights))
            same_weights(out, parse_weights(args.sft_weights, "--sft-weights"), "--sft-weights")
            same_weights(out, parse_guide(args.grpo_guide), "--grpo-guide")
            same_weights(out, parse_guide(args.sft_line_twins, "--sft-line-twins"),
                         "--sft-line-twins")
            same_passes(out, args.sft_passes)
            same_beta(out, args.grpo_beta)
        except InputError as exc:
            fail(str(exc))
    wall = json.loads((out / "wall.json").read_text()) if (out / "wall.json").exists() else {}
    rss = json.loads((out / "rss.json").read_text()) if (out / "rss.json").exists() else {}
    if not args.report_only:
        stages(args, out, seeds, wall, rss, keep_dir)
    plan = json.loads((out / "pilot.json").read_text())
    print(report(out, seeds, plan, wall, rss, Path(args.json) if args.json else None))


if __name__ == "__main__":
    main()
