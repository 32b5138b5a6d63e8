"""The GRPO update alone, on a fixed batch, one change at a time: what each costs.

    python benchmarks/update_speed.py [--prompts 2] [--G 4] [--json [OUT]]

The batch is the learning experiment's: the default model with LoRA r 16 on the attention
projections, the improve prompts of the first `--prompts` training tasks (the learning
experiment's opened prompt, about 700 tokens), `--G` completions each of 150-384 tokens. The
loss is the mean per-token log-probability of the completions (the GRPO loss's costly part:
its forward and backward). Variants, each timed in this one run over the same batch:

  learning        TRL's computation (each row's prompt + completion in one forward),
                  micro-batches of 2, bf16 autocast, no gradient checkpointing, LoRA dropout
                  0.05: what the learning experiment ran
  fp32            the same without bf16
  checkpointing   the same with gradient checkpointing
  micro4          micro-batches of 4 (one group)
  shared2         the shared-prefix update (train.shared_prefix), micro-batches of 2
  shared4         the shared-prefix update, micro-batches of one group
  no_dropout      shared4 without LoRA dropout (GRPO's default since: the engine samples from
                  the dropout-free policy)
  trimmed         no_dropout with each group cut to its own longest completion
  rows            each completion in a forward of its own over its prompt's cache, cut at
                  its own end, log-probabilities by log-sum-exp (what GRPO now runs)

Also checked on the batch: the update GRPO runs (`rows`) against TRL's computation, the loss
and every LoRA gradient (the largest relative difference), in FP32.

`--only NAME[,NAME]` times those variants alone (on an AVX2 machine without bf16, e.g.
`--only fp32,trimmed,rows --fp32`; `--fp32` turns bf16 off in every variant: emulated bf16 is
far slower than FP32 there).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_by_machine import json_flag, record  # noqa: E402

VARIANTS = ("learning", "fp32", "checkpointing", "micro4", "shared2", "shared4", "no_dropout",
            "trimmed", "rows")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--G", type=int, default=4)
    ap.add_argument("--only", default=None, help="comma-separated variants to time")
    ap.add_argument("--fp32", action="store_true", help="no bf16 in any variant")
    json_flag(ap, "update_speed")
    args = ap.parse_args()
    chosen = args.only.split(",") if args.only else list(VARIANTS)
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        ap.error(f"unknown variant {', '.join(unknown)}: choose from {', '.join(VARIANTS)}")

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import learning
    from perfgym.machine import cpu_model, machine_info
    from perfgym.models import resolve_model
    from perfgym.opening import answer_start
    from perfgym.policies.hf import chat_text
    from perfgym.tasks import get_task
    from perfgym.train.grpo import task_prompt
    from perfgym.train.shared_prefix import shared_prefix_logps

    path = resolve_model(None)
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05,
                                             target_modules=["q_proj", "k_proj", "v_proj",
                                                             "o_proj"], task_type="CAUSAL_LM"))
    machine, config = machine_info(), learning.eval_config()
    g = torch.Generator().manual_seed(0)
    rows, prompt_len = [], 0
    for name in learning.TRAIN_TASKS[:args.prompts]:
        task = get_task(name)
        text = chat_text(tokenizer, task_prompt(task, "improve", None, machine, config),
                         answer_start(task))
        prompt = tokenizer(text)["input_ids"]
        prompt_len = max(prompt_len, len(prompt))
        for _ in range(args.G):
            n = int(torch.randint(150, 385, (1,), generator=g))
            rows.append((prompt, torch.randint(100, 40000, (n,), generator=g).tolist()))
    C = max(len(c) for _, c in rows)
    ids, mask = [], []
    for prompt, completion in rows:  # TRL's layout: left-padded prompts, right-padded answers
        pad_p, pad_c = prompt_len - len(prompt), C - len(completion)
        ids.append([tokenizer.pad_token_id or 0] * pad_p + prompt + completion + [0] * pad_c)
        mask.append([0] * pad_p + [1] * (len(prompt) + len(completion)) + [0] * pad_c)
    input_ids, attention_mask = torch.tensor(ids), torch.tensor(mask)
    cmask = attention_mask[:, -C:].float()

    def plain(ids_, mask_):
        logits = model(input_ids=ids_, attention_mask=mask_).logits[:, -C - 1:-1]
        return torch.log_softmax(logits.float(), -1).gather(
            -1, ids_[:, -C:].unsqueeze(-1)).squeeze(-1)

    def shared(ids_, mask_):
        return shared_prefix_logps(model, ids_, mask_, C, layout="padded")[0]

    def trimmed(ids_, mask_):
        return shared_prefix_logps(model, ids_, mask_, C, layout="group")[0]

    def per_row(ids_, mask_):
        return shared_prefix_logps(model, ids_, mask_, C, layout="rows")[0]

    def set_dropout(p: float) -> None:
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = p

    def step(fn, micro: int, bf16: bool) -> float:
        model.train()
        model.zero_grad()
        started = time.perf_counter()
        total = cmask.sum()
        for start in range(0, len(rows), micro):
            sl = slice(start, start + micro)
            with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else \
                    contextlib.nullcontext():
                logps = fn(input_ids[sl], attention_mask[sl])
            ((logps * cmask[sl]).sum() / total).backward()
        return time.perf_counter() - started

    variants = {"learning": (plain, 2, True, False, 0.05),
                "fp32": (plain, 2, False, False, 0.05),
                "checkpointing": (plain, 2, True, True, 0.05),
                "micro4": (plain, 4, True, False, 0.05),
                "shared2": (shared, 2, True, False, 0.05),
                "shared4": (shared, 4, True, False, 0.05),
                "no_dropout": (shared, 4, True, False, 0.0),
                "trimmed": (trimmed, 4, True, False, 0.0),
                "rows": (per_row, 4, True, False, 0.0)}
    assert tuple(variants) == VARIANTS
    results = {}
    for name in chosen:
        fn, micro, bf16, checkpointing, dropout = variants[name]
        bf16 = bf16 and not args.fp32
        set_dropout(dropout)
        if checkpointing:
            model.gradient_checkpointing_enable()
            model.enable_input_require_grads()
        seconds = step(fn, micro, bf16)
        if checkpointing:
            model.gradient_checkpointing_disable()
        results[name] = {"seconds": seconds, "micro_batch": micro, "bf16": bf16,
                         "gradient_checkpointing": checkpointing, "lora_dropout": dropout,
                         "trimmed": fn in (trimmed, per_row), "per_row": fn is per_row}
        first = results[chosen[0]]["seconds"]
        print(f"{name:14s} {seconds:7.1f} s  ({seconds / first:.2f}x {chosen[0]})", flush=True)

    # the same numbers: loss and LoRA gradients, FP32, TRL's computation against the shared one
    set_dropout(0.0)  # the comparison is of computations, not of dropout's random masks
    grads = {}
    for name, fn in (("plain", plain), ("shared", per_row)):
        model.zero_grad()
        loss = 0.0
        for start in range(0, len(rows), args.G):
            sl = slice(start, start + args.G)
            part = (fn(input_ids[sl], attention_mask[sl]) * cmask[sl]).sum() / cmask.sum()
            part.backward()
            loss += part.item()
        grads[name] = (loss, {n: p.grad.clone() for n, p in model.named_parameters()
                              if p.requires_grad})
    loss_diff = abs(grads["plain"][0] - grads["shared"][0]) / abs(grads["plain"][0])
    grad_diff = max(float((grads["shared"][1][n] - gp).norm() / gp.norm().clamp_min(1e-30))
                    for n, gp in grads["plain"][1].items())
    print(f"FP32: loss relative difference {loss_diff:.2e}; largest LoRA gradient relative "
          f"difference {grad_diff:.2e}")
    result = {"machine": cpu_model(), "cores": os.cpu_count(), "rows": len(rows),
              "prompt_tokens": prompt_len, "completion_tokens_max": C,
              "completion_tokens": int(cmask.sum()), "variants": results,
              "loss_relative_difference": loss_diff, "gradient_relative_difference": grad_diff}
    if args.json:
        record("update_speed", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds: each variant's
    seconds."""
    return {f"{name}, s": f"{v['seconds']:.1f}" for name, v in result["variants"].items()}


if __name__ == "__main__":
    main()
