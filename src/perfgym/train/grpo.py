"""Online GRPO with real-machine rewards, on Hugging Face TRL's GRPOTrainer (tested: trl 1.16).

Two prompt modes (the experiments of "Improving HPC Code Generation Capability of LLMs via
Online RL with Real-Machine Benchmark Rewards"):
  fixed  experiment 1: the same prompts every step (the task, all techniques allowed);
  sqd    experiment 2: prompts drawn from the live SQD pool through TRL's `rollout_func`, so each
         step's prompts come from the pool as the previous step left it (an IterableDataset
         would lag it). Node identity (slot, parent, stage, op) travels to the reward function
         in the rollout's extra fields.
The reward function is async: it hands the group's completions to the executor (builds in
parallel, timing in the exclusive lane) off the event loop, applies a reward scheme per group,
and writes every completion and outcome into the run store.
"""
from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import EvalConfig
from ..cpuinfo import use_bf16
from ..executors import evaluate_many
from ..multisize import evaluate_folded
from ..outcome import Outcome, Status
from ..backends import backend_for
from ..edits import resolve_answer
from ..opening import STOP, answer_start, closed, full_answer
from ..prompts import expand_prompt, generate_prompt
from ..rewards import score
from ..search.engine import Engine
from ..search.sqd import SQDConfig
from ..store import RunStore
from ..tasks import Task, get_task
from .allocator import return_freed_memory
from .lm_head_tiles import shrink_lm_head_tiles
from .pool import LivePool

TESTED_TRL = "1.16.0"


@dataclass
class GRPOSettings:
    model_path: str | None  # None: the default model
    # fixed mode may name several, comma-separated: prompts cycle over them, a task named
    # twice twice a cycle
    task: str = "dgemm"
    mode: str = "fixed"  # fixed | sqd
    output_dir: str = "runs/grpo"
    steps: int = 200
    G: int = 8  # num_generations
    groups_per_step: int = 1  # prompts per step; the batch is groups_per_step * G
    fixed_prompts: int = 8
    learning_rate: float = 5e-7
    beta: float = 0.0  # KL coefficient; 0 leaves exploration unconstrained (the online-RL paper)
    epsilon: float = 0.2  # clip range
    loss_type: str = "grpo"
    max_completion_length: int = 1024
    temperature: float = 1.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0
    min_p: float = 0.0  # 0: off
    # No repetition penalty here: GRPO's loss takes its log-probabilities from the model's own
    # distribution, and a penalized sampler draws from another one (off-policy samples).
    reward: str = "tiered"  # sqd mode: group_normalized (the online-RL paper, experiment 2)
    opt: str = "O3"
    stage: int | None = None  # fixed mode: stage rules for every prompt
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    # no dropout in GRPO: the engine samples from the dropout-free policy, and the update's
    # log-probabilities must be of that same policy (a dropped-out forward is another one).
    # It was also a quarter of the update's forward (measured: benchmarks/update_speed.py)
    lora_dropout: float = 0.0
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    # TRL's default: it trades compute for memory (the whole batch in one backward needs it:
    # 20 completions of ~1,100 tokens took > 23 GB without). With a micro-batch that fits,
    # turn it off: under it the shared-prefix update is TRL's own (train.shared_prefix)
    gradient_checkpointing: bool = True
    low_memory: bool = False  # give freed memory back to the system (train/allocator.py)
    # bf16 autocast for the update: "auto" (where the hardware computes bf16: measured 2x
    # faster forward+backward with AVX512_BF16, and emulated, far slower than FP32, on an AVX2
    # CPU; cpuinfo.use_bf16), "on" or "off". The weights and the optimizer stay FP32; the
    # engine still samples from FP32 weights.
    bf16: bool | str = "auto"
    # completions per forward/backward; the step's batch is accumulated over micro-batches (one
    # generation call, one optimizer step). None: the whole batch at once. On a CPU, 20
    # completions of ~1,100 tokens at once took > 23 GB of activations (killed)
    micro_batch: int | None = None
    # the update computes each group's shared prompt once (train.shared_prefix): the same loss
    # and gradients as TRL's per-row forward, in less time where prompts are long
    shared_prefix: bool = True
    # the correct answers of a group timed against each other in interleaved rounds with the
    # baseline (perfgym.group_timing), so machine drift is not a random advantage
    group_timing: bool = True
    # fixed mode's generation: "transformers" (TRL's own), or "openvino": the fast CPU engine
    # (perfgym.engine), the whole step in one call from the trainer's current weights, or
    # "server": an OpenAI-compatible server at server_url that loads the step's weights by
    # path (perfgym.train.server_engine)
    engine: str = "transformers"
    server_url: str | None = None
    vllm: str | None = None  # None: transformers generation; "server" or "colocate"
    vllm_server_url: str | None = None
    save_steps: int = 50
    logging_steps: int = 1
    seed: int = 42
    sqd_ratios: tuple[float, float, float] = (0.4, 0.3, 0.3)
    sqd_stages: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    templates: str | None = None  # a directory of prompt templates overriding ours
    # fixed mode's prompt: "generate" from the task alone, or "improve" the task's naive
    # kernel (what a search asks first); answer_start: perfgym opens each answer (opening.py)
    prompt_op: str = "generate"
    answer_start: bool = False
    # "code": each answer is a whole kernel; "edits": SEARCH/REPLACE blocks of the kernel in
    # the improve prompt (perfgym.edits), made by perfgym before the answer is judged
    answer_form: str = "code"
    # multi-turn (fixed mode, the engine): each rollout is up to `turns` turns, each later turn
    # answering the gym's feedback on the one before (perfgym.train.multiturn); the reward is
    # the trajectory's return (perfgym.train.turns): best, last or discounted (gamma)
    turns: int = 1
    turn_return: str = "best"
    gamma: float = 0.4
    eval_overrides: dict[str, Any] = field(default_factory=dict)
    # evaluate on a Ray cluster's benchmark nodes ("auto" or an address); None: this machine
    ray_address: str | None = None
    sizes: str | None = None  # judge on the task's "train" (or "default") size set, folded
    # off-policy guidance: task name -> a known right answer (in the answer form), put in
    # place of the last sample of each of that task's groups (EngineRollout). A group whose
    # samples are all the same wrong answer has one reward and teaches nothing; beside a right
    # one its wrong ones go down and the right one up (guided GRPO: "Learning to Reason under
    # Off-Policy Guidance"). The guide is judged by the gym like every sample.
    guides: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.sizes not in (None, "default", "train"):
            raise ValueError(f"sizes {self.sizes!r} is not 'default' or 'train' (held-out sizes "
                             "are for judging the trained model)")
        if self.prompt_op not in ("generate", "improve"):
            raise ValueError(f"prompt_op {self.prompt_op!r} is not 'generate' or 'improve'")
        if self.answer_form not in ("code", "edits"):
            raise ValueError(f"answer_form {self.answer_form!r} is not 'code' or 'edits'")
        if self.answer_form == "edits" and (self.mode != "fixed" or self.prompt_op != "improve"
                                            or self.answer_start or self.turns > 1):
            raise ValueError("edit answers edit the improve prompt's kernel: fixed mode, "
                             "prompt_op improve, answers not opened, one turn")
        if self.mode == "sqd" and ("," in self.task or self.answer_start):
            raise ValueError("sqd mode trains on one task and does not open answers")
        if self.mode not in ("fixed", "sqd"):
            raise ValueError(f"mode {self.mode!r} is not 'fixed' or 'sqd'")
        if self.G < 2:
            raise ValueError("GRPO needs G (num_generations) of at least 2")
        if self.vllm not in (None, "server", "colocate"):
            raise ValueError("vllm is 'server' or 'colocate' (or unset)")
        if not (0.0 < self.top_p <= 1.0 and 0.0 <= self.min_p < 1.0 and self.top_k >= 0):
            raise ValueError("top_p is in (0, 1], min_p in [0, 1), top_k >= 0")
        if self.engine not in ("transformers", "openvino", "server"):
            raise ValueError(f"engine {self.engine!r} is not 'transformers', 'openvino' or "
                             "'server'")
        if self.engine in ("openvino", "server") and (self.mode != "fixed" or self.vllm):
            raise ValueError(f"the {self.engine} engine generates fixed mode's rollouts (not "
                             "sqd mode's, and not beside vLLM)")
        if (self.engine == "server") != bool(self.server_url):
            raise ValueError("the server engine needs a server URL (--server-url: an "
                             "OpenAI-compatible server's /v1 address), and a server URL needs "
                             "--engine server")
        if self.turns < 1:
            raise ValueError(f"turns {self.turns}: a rollout has at least one turn")
        if self.turns > 1:
            from .turns import RETURNS, TURN_SCHEMES
            if self.mode != "fixed" or self.engine not in ("openvino", "server"):
                raise ValueError("multi-turn rollouts (turns > 1) run in fixed mode on the "
                                 "openvino or the server engine")
            if self.reward not in TURN_SCHEMES:
                raise ValueError(f"multi-turn scores each turn alone: the reward is one of "
                                 f"{', '.join(TURN_SCHEMES)}, not {self.reward!r}")
            if self.turn_return not in RETURNS:
                raise ValueError(f"turn_return {self.turn_return!r} is not one of "
                                 f"{', '.join(RETURNS)}")
            if not 0.0 <= self.gamma <= 1.0:
                raise ValueError(f"gamma {self.gamma} is not within [0, 1]")
        if self.guides and (self.mode != "fixed" or self.engine not in ("openvino", "server")
                            or self.turns > 1 or self.answer_start):
            raise ValueError("guides replace a sample of a group on the engine: fixed mode, "
                             "the openvino or the server engine, one turn, answers not opened")
        if unknown := set(self.guides) - {t.strip() for t in self.task.split(",")}:
            raise ValueError(f"guides for tasks this run does not train on: "
                             f"{', '.join(sorted(unknown))}")
        if self.mode == "sqd" and self.vllm:
            raise ValueError("sqd mode generates in its rollout function with the trained "
                             "model; vLLM generation applies to fixed mode")


def neutral_for_refused(group: list[float]) -> list[float]:
    """A refused reward (NaN: the host failed, or the timing was disturbed) becomes the mean of
    its group's others: an advantage of zero, so the sample teaches nothing either way (a NaN
    would poison the whole batch's loss)."""
    known = [r for r in group if math.isfinite(r)]
    fill = sum(known) / len(known) if known else 0.0
    return [r if math.isfinite(r) else fill for r in group]


class PerfgymReward:
    """TRL reward function: completions -> executor -> reward scheme -> run store."""

    def __init__(self, task: Task, store: RunStore, eval_config: EvalConfig, scheme: str,
                 G: int, stage: int | None = None,
                 sizes: list[dict[str, int]] | None = None,
                 prompts: dict[str, tuple[Task, str | None]] | None = None,
                 executor: Callable[..., list[Outcome]] = evaluate_many,
                 group_timing: bool = False, size_set: str | None = None) -> None:
        self.executor = executor  # local, or a Ray cluster's evaluate_many
        # a group's correct answers timed against each other (perfgym.group_timing): on this
        # machine, at the default size
        self.group_timing = group_timing and sizes is None and size_set is None \
            and executor is evaluate_many
        self.sizes = sizes  # None: the default size; else each completion's folded Outcome
        # a size set by name ("train"): each prompt's task judged at its own sizes of that set
        # (fixed mode over several tasks; `sizes` are one task's and would not fit another's)
        self.size_set = size_set
        # several tasks (fixed mode): each prompt text's task and opening (None: not opened)
        self.prompts = prompts or {}
        # edit answers (answer_form "edits"): each prompt text's kernel, which they edit
        self.parents: dict[str, str] = {}
        self.__name__ = f"perfgym_{scheme}"  # TRL logs rewards under the function's name
        self.task, self.store, self.eval_config = task, store, eval_config
        self.scheme, self.G, self.stage = scheme, G, stage
        self.seen: list[str] = []  # every completion scored, in order (tests and logs)
        self.step_stats: list[dict[str, Any]] = []

    async def __call__(self, prompts: list, completions: list, **kwargs: Any) -> list[float]:
        return await asyncio.to_thread(self.score, prompts, completions, kwargs)

    def score(self, prompts: list, completions: list, kwargs: dict[str, Any]) -> list[float]:
        if "trajectory_return" in kwargs:  # multi-turn: the rollout judged and stored the turns
            return self.score_trajectories(kwargs)
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        prompt_texts = [p if isinstance(p, str) else p[-1]["content"] for p in prompts]
        n = len(texts)
        state = kwargs.get("trainer_state")
        step = state.global_step if state is not None else len(self.step_stats)
        stages = kwargs.get("stage") or [self.stage] * n
        slots = kwargs.get("slot") or [f"grpo:fixed:{step}:{i}" for i in range(n)]
        parents = kwargs.get("parent_id") or [None] * n
        ops = kwargs.get("op") or ["generate"] * n
        iterations = kwargs.get("iteration") or [step] * n

        tasks = [self.prompts.get(p, (self.task, None)) for p in prompt_texts]
        # opened: what the model wrote up to the entry's brace (TRL's own generation has no
        # stop string), after perfgym's opening
        texts = [full_answer(opening, closed(t)) if opening else t
                 for t, (_, opening) in zip(texts, tasks)]
        if self.parents:  # the kernel with the answer's edits made is what is judged and kept
            texts = [resolve_answer(t, self.parents[p])[0] if p in self.parents else t
                     for t, p in zip(texts, prompt_texts)]
        configs = [self.eval_config.replace(stage=s) for s in stages]

        def judge(indices: list[int], cfgs: list[EvalConfig]) -> list[Outcome]:
            judged: dict[int, Outcome] = {}
            for task in {tasks[i][0].name: tasks[i][0] for i in indices}.values():
                mine = [k for k, i in enumerate(indices) if tasks[i][0].name == task.name]
                sizes = task.sizes(self.size_set) if self.size_set else self.sizes
                for k, o in zip(mine, evaluate_folded(
                        task, [(texts[indices[k]], cfgs[k]) for k in mine], sizes,
                        executor=self.executor)):  # one evaluation batch per task
                    judged[k] = o
            return [judged[k] for k in range(len(indices))]

        if self.group_timing:
            from ..group_timing import judge_in_groups
            outcomes = judge_in_groups([t for t, _ in tasks], texts, configs, self.G, judge)
        else:
            outcomes = judge(list(range(n)), configs)
        rewards: list[float] = []
        for g in range(0, n, self.G):  # consecutive completions of one prompt form a group
            rewards += neutral_for_refused(score(self.scheme, outcomes[g:g + self.G],
                                                 opened=tasks[g][1] is not None))
        for i, (o, r) in enumerate(zip(outcomes, rewards)):
            if self.store.by_slot(slots[i]) is None:  # a resumed step may repeat a slot
                cid = self.store.add_pending(slots[i], iterations[i], stages[i], parents[i],
                                             ops[i], "grpo", prompt_texts[i], texts[i])
                self.store.complete(cid, o.to_dict(), r)
        self.seen += texts
        stats = step_stats(step, outcomes, rewards)
        self.step_stats.append(stats)
        if log_metric := kwargs.get("log_metric"):
            if stats["max_gflops"] is not None:
                log_metric("perfgym/max_gflops", stats["max_gflops"])
            log_metric("perfgym/max_reward", stats["max_reward"])
            log_metric("perfgym/ok_fraction", stats["statuses"].get("OK", 0) / max(n, 1))
            log_metric("perfgym/above_floor", stats["above_floor"])
            log_metric("perfgym/mean_reward", stats["mean_reward"])
            if stats["median_gflops"] is not None:
                log_metric("perfgym/median_gflops", stats["median_gflops"])
            for status in Status:  # the status mix, every step, as shares
                log_metric(f"perfgym/status/{status.value}",
                           stats["statuses"].get(status.value, 0) / max(n, 1))
        self.store.event("grpo_step", **stats)
        return rewards


    def score_trajectories(self, kwargs: dict[str, Any]) -> list[float]:
        """Multi-turn rewards: each trajectory's return, a refused one (a turn the host could
        not judge) neutral in its group; the step's event has the share OK and the best
        GFLOP/s by turn."""
        returns = list(kwargs["trajectory_return"])
        rewards: list[float] = []
        for g in range(0, len(returns), self.G):
            rewards += neutral_for_refused(returns[g:g + self.G])
        state = kwargs.get("trainer_state")
        step = state.global_step if state is not None else len(self.step_stats)
        statuses, rates = kwargs.get("turn_statuses") or [], kwargs.get("turn_gflops") or []
        depth = max((len(s) for s in statuses), default=0)
        by_turn = [{"turn": k + 1, "trajectories": sum(len(s) > k for s in statuses),
                    "ok": sum(len(s) > k and s[k] == "OK" for s in statuses),
                    "best_gflops": max((r[k] for r in rates if len(r) > k and r[k]), default=None)}
                   for k in range(depth)]
        stats = {"step": step, "completions": len(returns),
                 "mean_reward": sum(rewards) / len(rewards) if rewards else None,
                 "max_reward": max(rewards) if rewards else None, "by_turn": by_turn}
        self.step_stats.append(stats)
        if log_metric := kwargs.get("log_metric"):
            log_metric("perfgym/mean_reward", stats["mean_reward"])
            for row in by_turn:
                log_metric(f"perfgym/turn{row['turn']}_ok_fraction",
                           row["ok"] / max(row["trajectories"], 1))
        self.store.event("grpo_step", **stats)
        return rewards


# The reward floor: an answer with no usable kernel in it. Anything past extraction and the
# source rules is "above the floor" (it reached the compiler), whatever the scheme pays for it.
FLOOR_STATUSES = {Status.FORMAT_ERROR, Status.LIBRARY_VIOLATION, Status.STAGE_VIOLATION}


def step_stats(step: int, outcomes: list[Outcome], rewards: list[float]) -> dict[str, Any]:
    rates = sorted(o.gflops for o in outcomes if o.ok and o.gflops)
    n = len(outcomes)
    return {"step": step, "completions": n,
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,
            "max_reward": max(rewards) if rewards else None,
            "max_gflops": rates[-1] if rates else None,
            "median_gflops": rates[len(rates) // 2] if rates else None,
            # GFLOP/s per sample with failures as 0: the learning curve's positive measure
            "mean_gflops": sum(rates) / n if n else None,
            "above_floor": sum(o.status not in FLOOR_STATUSES for o in outcomes) / max(n, 1),
            "statuses": dict(Counter(o.status.value for o in outcomes))}


class SQDRollout:
    """TRL rollout_func for sqd mode: the batch's prompts come from the live pool, not the
    dataset (whose rows are placeholders). Generates with the model being trained."""

    def __init__(self, pool: LivePool, G: int, max_new_tokens: int, temperature: float,
                 top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0) -> None:
        self.pool, self.G = pool, G
        self.max_new_tokens, self.temperature = max_new_tokens, temperature
        self.top_k, self.top_p, self.min_p = top_k, top_p, min_p
        self.prompts_by_step: list[list[dict[str, Any]]] = []  # what each step drew (tests)

    def __call__(self, prompts: list, trainer: Any) -> dict[str, Any]:
        import torch
        groups = len(prompts) // self.G  # TRL repeats each dataset prompt G times
        nodes = self.pool.next_nodes(groups)
        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        texts = [_chat(tokenizer, self.pool.prompt(n)) for n in nodes]
        self.prompts_by_step.append([{"parent_id": n.parent.id, "op": n.op, "stage": n.stage,
                                      "iteration": n.iteration} for n in nodes])
        prompt_ids, completion_ids = [], []
        was_training = model.training
        model.eval()
        for text in texts:
            enc = tokenizer(text, return_tensors="pt").to(model.device)
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=self.max_new_tokens,
                                     do_sample=True, temperature=self.temperature,
                                     top_k=self.top_k, top_p=self.top_p,
                                     min_p=self.min_p or None,
                                     num_return_sequences=self.G,
                                     pad_token_id=tokenizer.pad_token_id)
            ids = enc["input_ids"][0].tolist()
            for seq in out:
                completion = seq[len(ids):].tolist()
                while completion and completion[-1] == tokenizer.pad_token_id:
                    completion.pop()
                prompt_ids.append(ids)
                completion_ids.append(completion)
        if was_training:
            model.train()
        extra: dict[str, list] = {"slot": [], "parent_id": [], "op": [], "stage": [],
                                  "iteration": []}
        for n in nodes:
            for g in range(self.G):
                extra["slot"].append(n.slot(g))
                extra["parent_id"].append(n.parent.id)
                extra["op"].append(n.op)
                extra["stage"].append(n.stage)
                extra["iteration"].append(n.iteration)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None,
                **extra}


def _chat(tokenizer: Any, prompt: str, opening: str | None = None) -> str:
    from ..policies.hf import chat_text  # what search's local policies send, too
    return chat_text(tokenizer, prompt, opening)


def task_prompt(task: Task, op: str, stage: int | None, machine: dict[str, Any],
                config: EvalConfig, templates: Path | None = None) -> str:
    """The user prompt of fixed-mode GRPO, of opened SFT data and of the learning experiment's
    evaluation: "generate" from the task alone, or "improve" the task's naive kernel (what a
    search asks first). One function, so the three never drift apart."""
    if op == "improve":
        shown = {"status": "OK",
                 "message": f"the task's {backend_for(task).baseline_label} kernel"}
        return expand_prompt(task, "improve", prompt_kernel(task, config), shown, stage,
                             machine, override_dir=templates, config=config)
    return generate_prompt(task, stage, machine, override_dir=templates, config=config)


def prompt_kernel(task: Task, config: EvalConfig) -> str:
    """The kernel an improve prompt shows (the task's naive one): what edit answers edit."""
    return backend_for(task).baseline_candidate(task, config)[0]


def fixed_prompts(settings: GRPOSettings, tokenizer: Any, machine: dict[str, Any],
                  config: EvalConfig) -> tuple[dict[str, tuple[Task, str | None]], list[str]]:
    """Fixed mode's prompt texts (chat-templated, opened when asked), each with its task and
    opening, and the order the dataset cycles through them: a task named again in
    `settings.task` comes again in the cycle (more of a step's groups are its own)."""
    templates = Path(settings.templates) if settings.templates else None
    prompts: dict[str, tuple[Task, str | None]] = {}
    cycle: list[str] = []
    texts: dict[str, str] = {}
    for name in [t.strip() for t in settings.task.split(",") if t.strip()]:
        if name not in texts:
            task = get_task(name)
            text = task_prompt(task, settings.prompt_op, settings.stage, machine, config,
                               templates)
            opening = answer_start(task) if settings.answer_start else None
            texts[name] = _chat(tokenizer, text, opening)
            prompts[texts[name]] = (task, opening)
        cycle.append(texts[name])
    return prompts, cycle


@dataclass
class GRPORun:
    trainer: Any
    reward: PerfgymReward
    rollout: Any  # SQDRollout, EngineRollout or None (TRL's own generation)
    store: RunStore


def build(settings: GRPOSettings, model: Any = None, tokenizer: Any = None) -> GRPORun:
    """Everything TRL needs, wired to perfgym. `model`/`tokenizer` may be passed in (tests)."""
    import trl
    from datasets import Dataset
    from trl import GRPOTrainer

    if trl.__version__ != TESTED_TRL:
        import warnings
        warnings.warn(f"perfgym's GRPO adapter is tested with trl {TESTED_TRL}; "
                      f"this is trl {trl.__version__}")
    task = get_task(settings.task.split(",")[0].strip())
    if model is None:  # an absolute path: the adapter records it as its base model
        from ..models import resolve_model
        settings.model_path = str(resolve_model(settings.model_path))
    out = Path(settings.output_dir)
    store = RunStore(out)
    store.set_config({"kind": "grpo", **{k: v for k, v in asdict(settings).items()
                                         if k != "eval_overrides"},
                      "bf16_used": use_bf16(settings.bf16)})  # ("auto" resolved here)
    model, tokenizer = _model_and_tokenizer(settings, model, tokenizer)
    eval_config = EvalConfig(opt=settings.opt, **settings.eval_overrides)
    from ..machine import machine_info
    machine = machine_info()

    batch = settings.groups_per_step * settings.G
    rows = max(settings.steps, 1) * settings.groups_per_step
    size_set = task.sizes(settings.sizes) if settings.sizes else None
    executor = _executor(settings)
    reward = PerfgymReward(task, store, eval_config, settings.reward, settings.G, settings.stage,
                           size_set, executor=executor, group_timing=settings.group_timing,
                           size_set=settings.sizes)
    rollout = None
    if settings.mode == "fixed":
        reward.prompts, texts = fixed_prompts(settings, tokenizer, machine, eval_config)
        if settings.answer_form == "edits":
            reward.parents = {text: prompt_kernel(t, eval_config)
                              for text, (t, _) in reward.prompts.items()}
        prompts = [texts[i % len(texts)] for i in range(max(settings.fixed_prompts, len(texts)))]
        dataset = Dataset.from_list([{"prompt": prompts[i % len(prompts)]} for i in range(rows)])
        if settings.engine in ("openvino", "server"):  # rollouts generated in one call
            rollout = _engine_rollout(settings, model, tokenizer, reward, store, machine,
                                      eval_config, size_set, executor)
    else:
        rollout = _sqd_rollout(settings, task, store, machine, eval_config, size_set, executor)
        dataset = Dataset.from_list([{"prompt": "sqd"} for _ in range(rows)])

    config = _grpo_config(settings, out, batch)
    peft_config = _lora_config(settings)
    trainer_class = GRPOTrainer
    if settings.shared_prefix:
        from .shared_prefix import shared_prefix_trainer
        trainer_class = shared_prefix_trainer(GRPOTrainer)
    trainer = trainer_class(model=model, reward_funcs=[reward], args=config,
                          train_dataset=dataset, processing_class=tokenizer,
                          peft_config=peft_config, rollout_func=rollout,
                          callbacks=[JsonlLogger(out / "train_log.jsonl")])
    return GRPORun(trainer, reward, rollout, store)


def _model_and_tokenizer(settings: GRPOSettings, model: Any, tokenizer: Any) -> tuple[Any, Any]:
    """The ones passed in, else loaded from settings.model_path; the tokenizer pads with its
    end-of-sequence token when it has no padding token of its own."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(settings.model_path)
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(settings.model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def _executor(settings: GRPOSettings) -> Callable[..., list[Outcome]]:
    """Where completions are judged: this machine, or a Ray cluster's benchmark nodes."""
    if settings.ray_address:
        from ..executors.ray_executor import RayExecutor
        return RayExecutor(None if settings.ray_address == "auto" else
                           settings.ray_address).evaluate_many
    return evaluate_many


def _engine_rollout(settings: GRPOSettings, model: Any, tokenizer: Any, reward: PerfgymReward,
                    store: RunStore, machine: dict[str, Any], eval_config: EvalConfig,
                    size_set: list[dict[str, int]] | None, executor: Callable) -> Any:
    """Fixed mode's rollout on the openvino or server engine: one turn per completion, or a
    multi-turn conversation with the gym's feedback between turns."""
    if settings.engine == "openvino":
        from ..models import shipped_gguf
        template, make_engine = str(shipped_gguf()), None  # (the fast CPU engine)
    else:  # a server loads checkpoints: no GGUF template
        from functools import partial

        from .server_engine import ServerEngine
        template = ""
        make_engine = partial(ServerEngine, settings.server_url,
                              Path(settings.output_dir) / "server-weights", model.config,
                              tokenizer)
    stop = STOP if settings.answer_start else ()
    if settings.turns > 1:
        from .multiturn import MultiTurnRollout
        templates = Path(settings.templates) if settings.templates else None
        users = {t.name: task_prompt(t, settings.prompt_op, settings.stage, machine,
                                     eval_config, templates)
                 for t, _ in reward.prompts.values()}
        return MultiTurnRollout(
            template, settings.G, settings.max_completion_length,
            settings.temperature, settings.top_k, settings.top_p, settings.min_p,
            settings.seed, stop, settings.turns, settings.turn_return, settings.gamma,
            settings.reward, reward.prompts, users, eval_config, store, machine,
            size_set, settings.stage, executor, make_engine)
    from .engine_rollout import EngineRollout, guide_ids
    return EngineRollout(template, settings.G, settings.max_completion_length,
                         settings.temperature, settings.top_k, settings.top_p,
                         settings.min_p, seed=settings.seed, stop=stop,
                         make_engine=make_engine,
                         guides={text: guide_ids(tokenizer, settings.guides[t.name])
                                 for text, (t, _) in reward.prompts.items()
                                 if t.name in settings.guides})


def _sqd_rollout(settings: GRPOSettings, task: Task, store: RunStore, machine: dict[str, Any],
                 eval_config: EvalConfig, size_set: list[dict[str, int]] | None,
                 executor: Callable) -> SQDRollout:
    """Sqd mode's rollout: prompts drawn from the live SQD pool (whose seed is benchmarked
    now, through the engine)."""
    engine = Engine(store, _NoPolicy(), task, eval_config, settings.reward, machine=machine,
                    templates=Path(settings.templates) if settings.templates else None,
                    sizes=size_set)
    engine.executor = executor
    pool = LivePool(engine, SQDConfig(iterations=10**9, G=settings.G,
                                      ratios=settings.sqd_ratios, stages=settings.sqd_stages),
                    G=settings.G)
    return SQDRollout(pool, settings.G, settings.max_completion_length,
                      settings.temperature, settings.top_k, settings.top_p,
                      settings.min_p)


def _grpo_config(settings: GRPOSettings, out: Path, batch: int) -> Any:
    """TRL's GRPOConfig: the step's batch of `batch` completions, in micro-batches."""
    from trl import GRPOConfig
    micro = settings.micro_batch or batch
    if batch % micro:
        raise ValueError(f"micro_batch {micro} does not divide the step's batch of {batch}")
    report_to = ["tensorboard"] if _has("tensorboard") else []
    return GRPOConfig(
        output_dir=str(out / "checkpoints"), max_steps=settings.steps,
        per_device_train_batch_size=micro, gradient_accumulation_steps=batch // micro,
        num_generations=settings.G, learning_rate=settings.learning_rate, beta=settings.beta,
        epsilon=settings.epsilon, loss_type=settings.loss_type,
        max_completion_length=settings.max_completion_length,
        temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p,
        min_p=settings.min_p or None, logging_steps=settings.logging_steps,
        save_steps=settings.save_steps, seed=settings.seed, report_to=report_to,
        use_vllm=settings.vllm is not None,
        vllm_mode=settings.vllm or "colocate", vllm_server_base_url=settings.vllm_server_url,
        shuffle_dataset=False, use_cpu=not _cuda(),
        gradient_checkpointing=settings.gradient_checkpointing, bf16=use_bf16(settings.bf16),
        disable_dropout=True)  # the model's own dropout too (see lora_dropout)


def _lora_config(settings: GRPOSettings) -> Any:
    """PEFT's LoraConfig when a LoRA adapter is trained, else None (all weights)."""
    if not settings.lora:
        return None
    from peft import LoraConfig
    return LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha,
                      lora_dropout=settings.lora_dropout,
                      target_modules=list(settings.lora_targets), task_type="CAUSAL_LM")


def last_complete_checkpoint(directory: Path) -> Path | None:
    """The newest checkpoint whose save finished, or None. The trainer writes its state file
    last; a run killed while saving leaves a newer checkpoint without it, which transformers
    would pick and fail to load."""
    done = [p for p in directory.glob("checkpoint-*")
            if p.name.removeprefix("checkpoint-").isdigit()
            and (p / "trainer_state.json").is_file()]
    return max(done, key=lambda p: int(p.name.removeprefix("checkpoint-")), default=None)


def train(settings: GRPOSettings, resume: bool = False, model: Any = None,
          tokenizer: Any = None) -> GRPORun:
    if settings.low_memory:
        return_freed_memory()
        shrink_lm_head_tiles()
    run = build(settings, model, tokenizer)
    checkpoint = last_complete_checkpoint(Path(settings.output_dir) / "checkpoints") \
        if resume else None
    run.trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    run.trainer.save_model(str(Path(settings.output_dir) / "final"))
    return run


class _NoPolicy:
    """The engine of sqd mode only benchmarks the seed; generation happens in the rollout."""

    name = "grpo"

    def generate(self, prompts: list[str], n: int, **_: Any) -> list[list[str]]:
        raise RuntimeError("sqd-mode GRPO generates in its rollout function")


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


def _jsonable(v: Any) -> Any:
    return v if isinstance(v, (int, float, str, bool, type(None))) and not (
        isinstance(v, float) and math.isnan(v)) else str(v)


from transformers import TrainerCallback  # noqa: E402  (train extra only)


class JsonlLogger(TrainerCallback):
    """Every log TRL emits (loss, reward mean/std, KL, our perfgym/* metrics) as a JSONL line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs:
            with open(self.path, "a") as f:
                f.write(json.dumps({"step": state.global_step,
                                    **{k: _jsonable(v) for k, v in logs.items()}}) + "\n")
