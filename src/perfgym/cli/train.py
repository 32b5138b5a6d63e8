"""`perfgym train`: GRPO, SFT and recipes (the train extra)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import typer

from ..rewards import SCHEMES
from .common import UserError, _guard, app, console


train_app = typer.Typer(help="Train a model from the gym's rewards (needs the train extra).",
                        no_args_is_help=True)
app.add_typer(train_app, name="train")


def _train_extra():
    try:
        import peft  # noqa: F401
        import trl  # noqa: F401
    except ImportError:
        raise UserError("training needs the train extra: pip install torch==2.13.0 "
                        "'perfgym[train]' (or a CUDA torch build first)") from None


@train_app.command("grpo")
@_guard
def train_grpo(
    model_path: Optional[Path] = typer.Option(None, help="model or adapter directory or .gguf "
                                              "(default: SmolLM2-135M-Instruct)"),
    task: str = typer.Option("dgemm", help="the task; fixed mode takes several, "
                             "comma-separated (prompts cycle over them)"),
    mode: str = typer.Option("fixed", help="fixed (experiment 1) or sqd (experiment 2)"),
    output_dir: Path = typer.Option(Path("runs/grpo")),
    steps: int = typer.Option(200),
    g: int = typer.Option(8, "--G", help="completions per prompt (num_generations)"),
    groups_per_step: int = typer.Option(1, help="prompts per step"),
    fixed_prompts: int = typer.Option(8),
    lr: float = typer.Option(5e-7, help="learning rate"),
    beta: float = typer.Option(0.0, help="KL coefficient (0 allowed)"),
    epsilon: float = typer.Option(0.2, help="clip range"),
    loss_type: str = typer.Option("grpo"),
    max_completion_length: int = typer.Option(1024),
    temperature: float = typer.Option(1.0),
    top_k: int = typer.Option(0, help="sample from the k likeliest tokens (0: off)"),
    top_p: float = typer.Option(1.0, help="nucleus sampling (1: off)"),
    min_p: float = typer.Option(0.0, help="drop tokens below this share of the likeliest "
                                "(0: off); no repetition penalty: GRPO needs on-policy samples"),
    reward: str = typer.Option("tiered", help=f"reward scheme: {', '.join(SCHEMES)}"),
    opt: str = typer.Option("O3", help="compiler optimization level of the benchmark"),
    stage: Optional[int] = typer.Option(None, help="stage rules (fixed mode)"),
    lora: bool = typer.Option(False, help="train a LoRA adapter instead of all weights"),
    lora_r: int = typer.Option(16),
    lora_alpha: int = typer.Option(32),
    lora_dropout: float = typer.Option(0.0, help="0: the update's log-probabilities are of "
                                       "the policy the engine samples from"),
    lora_targets: str = typer.Option("q_proj,k_proj,v_proj,o_proj"),
    vllm: Optional[str] = typer.Option(None, help="server or colocate (fixed mode)"),
    vllm_server_url: Optional[str] = typer.Option(None),
    engine: Optional[str] = typer.Option(None, help="fixed mode's generation: openvino (the "
                                         "fast CPU engine), transformers, or server (an "
                                         "OpenAI-compatible server at --server-url; default: "
                                         "openvino for the default model when installed)"),
    server_url: Optional[str] = typer.Option(None, help="--engine server: the server's /v1 "
                                             "address (it must load a model by path, as "
                                             "transformers serve does)"),
    save_steps: int = typer.Option(50),
    templates: Optional[Path] = typer.Option(None, help="prompt template directory"),
    sizes: Optional[str] = typer.Option(None, help="reward on a size set of the task: default "
                                        "or train (the folded outcome: worst status, "
                                        "geometric-mean rates)"),
    prompt_op: str = typer.Option("generate", help="fixed mode's prompt: generate from the "
                                  "task, or improve its naive kernel (as a search starts)"),
    answer_start: Optional[bool] = typer.Option(
        None, "--answer-start/--no-answer-start", help="perfgym writes the start of each "
        "answer and the model the body; the parse tier is not paid (default: on for the "
        "default model in fixed mode)"),
    answer_form: str = typer.Option("code", help="code: each answer is a whole kernel; "
                                    "edits: SEARCH/REPLACE blocks of the improve prompt's "
                                    "kernel, made by perfgym before judging (--prompt-op "
                                    "improve; answers not opened)"),
    turns: int = typer.Option(1, help="multi-turn: turns per rollout, each later one "
                              "answering the gym's feedback on the one before (fixed mode, "
                              "the openvino or server engine)"),
    turn_return: str = typer.Option("best", help="a trajectory's reward: best, last or "
                                    "discounted (a repeated kernel adds nothing)"),
    gamma: float = typer.Option(0.4, help="the discount of --turn-return discounted"),
    bf16: str = typer.Option("auto", help="bf16 autocast for the update: auto (where the "
                             "hardware computes bf16: AVX512_BF16 or AMX, 2x FP32; elsewhere "
                             "it is emulated, far slower), on or off"),
    micro_batch: Optional[int] = typer.Option(None, help="completions per forward and "
                                              "backward (the step's batch is accumulated)"),
    gradient_checkpointing: bool = typer.Option(
        True, "--gradient-checkpointing/--no-gradient-checkpointing",
        help="recompute each layer's forward in the backward (TRL's default: less memory, "
        "about 1.3x the update's time, and the shared-prefix update is off); turn it off "
        "with a --micro-batch that fits in memory"),
    shared_prefix: bool = typer.Option(True, "--shared-prefix/--no-shared-prefix",
                                       help="compute each group's shared prompt once in the "
                                       "update (same loss and gradients; faster for long "
                                       "prompts)"),
    group_timing: bool = typer.Option(True, "--group-timing/--no-group-timing",
                                      help="time each group's correct answers against each "
                                      "other and the baseline in interleaved rounds (this "
                                      "machine, the default size)"),
    ray_address: Optional[str] = typer.Option(None, help="judge the completions on this Ray "
                                              "cluster's benchmark nodes (an address, or auto)"),
    low_memory: bool = typer.Option(False, help="give freed memory back to the system as the "
                                    "update runs (glibc's mmap threshold fixed at 1 MiB) and "
                                    "use smaller tiles in TRL's LM head: the 135M multi-turn "
                                    "run peaked at 3.9 GB instead of 11.3, its updates 1.13x "
                                    "as long"),
    resume: bool = typer.Option(False, help="continue from the last checkpoint"),
) -> None:
    """Online GRPO with real-machine rewards (TRL GRPOTrainer)."""
    flags = SimpleNamespace(**locals())  # every option above, by name (nothing else is bound yet)
    _train_extra()
    from ..train import grpo
    run = grpo.train(_grpo_settings(flags), resume=resume)
    last = run.reward.step_stats[-1] if run.reward.step_stats else {}
    console.print(f"trained {len(run.reward.step_stats)} steps; last step: {last}; model in "
                  f"{output_dir}/final, log in {output_dir}/train_log.jsonl", highlight=False)


def _grpo_settings(flags: SimpleNamespace):
    """The GRPO run `train grpo`'s options ask for: the choices checked, and the defaults that
    depend on other options (engine, answer_start) resolved."""
    from ..train import grpo
    if flags.reward not in SCHEMES:
        raise UserError(f"reward scheme {flags.reward!r} is not one of {', '.join(SCHEMES)}")
    from ..cpuinfo import BF16_CHOICES
    if flags.bf16 not in BF16_CHOICES:
        raise UserError(f"--bf16 {flags.bf16!r} is not one of {', '.join(BF16_CHOICES)}")
    engine = flags.engine
    if engine is None and flags.server_url:
        engine = "server"
    if engine is None:
        from ..engine.openvino import available
        engine = ("openvino" if available() and flags.mode == "fixed" and flags.vllm is None
                  and flags.model_path is None else "transformers")
    model_path, mode, answer_start = flags.model_path, flags.mode, flags.answer_start
    return grpo.GRPOSettings(
        model_path=str(model_path) if model_path else None, task=flags.task, mode=mode,
        output_dir=str(flags.output_dir), steps=flags.steps, G=flags.g,
        groups_per_step=flags.groups_per_step, fixed_prompts=flags.fixed_prompts,
        learning_rate=flags.lr, beta=flags.beta, epsilon=flags.epsilon,
        loss_type=flags.loss_type, max_completion_length=flags.max_completion_length,
        temperature=flags.temperature, top_k=flags.top_k, top_p=flags.top_p, min_p=flags.min_p,
        reward=flags.reward, opt=flags.opt, stage=flags.stage, lora=flags.lora,
        lora_r=flags.lora_r, lora_alpha=flags.lora_alpha, lora_dropout=flags.lora_dropout,
        lora_targets=tuple(flags.lora_targets.split(",")), vllm=flags.vllm,
        vllm_server_url=flags.vllm_server_url, engine=engine, server_url=flags.server_url,
        save_steps=flags.save_steps, templates=str(flags.templates) if flags.templates else None,
        sizes=flags.sizes, prompt_op=flags.prompt_op,
        answer_start=(model_path is None and mode == "fixed" and flags.answer_form == "code")
        if answer_start is None else answer_start, answer_form=flags.answer_form,
        turns=flags.turns, turn_return=flags.turn_return, gamma=flags.gamma,
        bf16=flags.bf16, micro_batch=flags.micro_batch, ray_address=flags.ray_address,
        shared_prefix=flags.shared_prefix, group_timing=flags.group_timing,
        gradient_checkpointing=flags.gradient_checkpointing, low_memory=flags.low_memory)


@train_app.command("sft")
@_guard
def train_sft(
    model_path: Optional[Path] = typer.Option(None, help="model directory or .gguf (default: "
                                              "SmolLM2-135M-Instruct)"),
    pairs: Path = typer.Option(..., help="JSONL of pairs (or prompt/completion records)"),
    output_dir: Path = typer.Option(Path("runs/sft")),
    lora: bool = typer.Option(True),
    lora_r: int = typer.Option(32),
    lora_alpha: int = typer.Option(64),
    lora_dropout: float = typer.Option(0.1),
    lr: float = typer.Option(2e-4),
    batch_size: int = typer.Option(4),
    max_length: int = typer.Option(4096),
    epochs: float = typer.Option(8.0),
    warmup_steps: int = typer.Option(100),
    max_steps: int = typer.Option(-1, help="> 0 overrides epochs"),
    low_memory: bool = typer.Option(False, help="give freed memory back to the system as the "
                                    "update runs (glibc's mmap threshold fixed at 1 MiB): SFT "
                                    "of the 135M model peaked at 5.4 GB instead of 7.6, its "
                                    "steps 1.4x as long"),
    gradient_checkpointing: bool = typer.Option(
        True, "--gradient-checkpointing/--no-gradient-checkpointing",
        help="recompute each layer's forward in the backward (TRL's default); off, the same "
        "weights in 0.77x the time and 1.7x the memory (the 135M model, the learning "
        "experiment's data, an AVX2 EPYC)"),
) -> None:
    """SFT with LoRA on slow/fast pairs (KernelCompare's defaults)."""
    _train_extra()
    from ..train import sft
    if not pairs.is_file():
        raise UserError(f"--pairs {pairs} does not exist")
    settings = sft.SFTSettings(model_path=str(model_path) if model_path else None,
                               pairs=str(pairs),
                               output_dir=str(output_dir), lora=lora, lora_r=lora_r,
                               lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                               learning_rate=lr, batch_size=batch_size, max_length=max_length,
                               epochs=epochs, warmup_steps=warmup_steps, max_steps=max_steps,
                               low_memory=low_memory,
                               gradient_checkpointing=gradient_checkpointing)
    sft.train(settings)
    console.print(f"adapter in {output_dir}/final" + (f", merged model in {output_dir}/merged"
                                                      if lora else ""), highlight=False)


@train_app.command("recipe")
@_guard
def train_recipe(recipe: str = typer.Argument(..., help="a recipe TOML file, or the name of a "
                                             "shipped one: online_rl_exp1_fixed, "
                                             "online_rl_exp2_sqd, kernelcompare_sft_then_grpo, "
                                             "cpu_learning_curve"),
                 model_path: Optional[Path] = typer.Option(None, help="model directory or .gguf "
                                                           "(default: SmolLM2-135M-Instruct)"),
                 output_dir: Path = typer.Option(Path("runs/recipe")),
                 steps: Optional[int] = typer.Option(None, help="GRPO steps"),
                 g: Optional[int] = typer.Option(None, "--G", help="GRPO completions per prompt"),
                 lr: Optional[float] = typer.Option(None, help="GRPO learning rate"),
                 max_completion_length: Optional[int] = typer.Option(
                     None, help="GRPO tokens per completion"),
                 sft_steps: Optional[int] = typer.Option(None, help="SFT optimizer steps"),
                 sft_lr: Optional[float] = typer.Option(None, help="SFT learning rate"),
                 sft_max_length: Optional[int] = typer.Option(None, help="SFT tokens per "
                                                              "example"),
                 seed: Optional[int] = typer.Option(None, help="GRPO seed"),
                 smoke: bool = typer.Option(False, help="minutes on the CPU with the tiny "
                                            "local model")) -> None:
    """Run a recipe: [pairs] or [data] -> [sft] -> [grpo], each section if present; flags
    override the recipe's values."""
    _train_extra()
    from ..train import recipes
    overrides = {"grpo": {"steps": steps, "G": g, "learning_rate": lr, "seed": seed,
                          "max_completion_length": max_completion_length},
                 "sft": {"max_steps": sft_steps, "learning_rate": sft_lr,
                         "max_length": sft_max_length}}
    results = recipes.run(recipe, str(model_path) if model_path else None, output_dir, smoke,
                          overrides)
    (output_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    console.print(json.dumps(results, indent=2, default=str), highlight=False)
    console.print(f"results in {output_dir / 'results.json'}", style="dim", highlight=False)
