"""Resident memory of the small multi-turn GRPO run (the multi-turn CLI test's settings) after
each phase: model load, engine compile, generation, judging, the update, the checkpoint.

    python benchmarks/grpo_memory_phases.py OUT_DIR        # STEPS=2 for two steps
    GC=1 python benchmarks/grpo_memory_phases.py OUT_DIR   # with gradient checkpointing (TRL's
                                                           # own update, the CLI's default)
    LOW_MEMORY=1 ...     # with --low-memory (freed memory given back, smaller LM-head tiles)
    SAVED=1 ...          # what the first forward saves for the backward, by shape; then stop
    TILES=T,V ...        # TRL's LM-head tile: T tokens x V vocabulary columns (1.16: 4096,32768)

Prints VmRSS and VmHWM of this process (the trainer's, where the memory is) before and after
each wrapped call, to stderr. The figures in docs/training/train.md ("Memory") come from it and
from grpo_memory_update.py, on the 2-core AMD EPYC with AVX2.
"""
import os
import sys
import time
from pathlib import Path

T0 = time.time()
def mem():
    d = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            k, v = line.split(":"); d[k] = int(v.split()[0]) // 1024
    return d
def mark(what):
    m = mem()
    print(f"[{time.time()-T0:7.1f}s] RSS {m['VmRSS']:6d} MB  HWM {m['VmHWM']:6d} MB  {what}", file=sys.stderr, flush=True)
mark("start")
from perfgym.engine import openvino as ov_engine
from perfgym.train import engine_rollout, grpo, multiturn

mark("imports")

def wrap(cls, name, label=None):
    orig = getattr(cls, name)
    def f(*a, **k):
        mark(f"before {label or name}")
        r = orig(*a, **k)
        mark(f"after {label or name}")
        return r
    setattr(cls, name, f)
wrap(grpo, "_model_and_tokenizer", "model load")
wrap(grpo, "_engine_rollout", "rollout construction")
wrap(ov_engine.OpenVINOEngine, "_load", "engine compile (_load)")
wrap(ov_engine.OpenVINOEngine, "generate", "engine generate")
wrap(engine_rollout, "merged_state", "merged_state")
wrap(multiturn.MultiTurnRollout, "_judge", "judge turn")
wrap(multiturn.MultiTurnRollout, "__call__", "rollout")
import trl

wrap(trl.GRPOTrainer, "__init__", "GRPOTrainer init")
wrap(trl.GRPOTrainer, "training_step", "training_step (fwd+bwd)")
wrap(trl.GRPOTrainer, "_save_checkpoint", "save checkpoint")
wrap(trl.GRPOTrainer, "_get_per_token_logps_and_entropies", "log-probabilities (forward)")
wrap(trl.GRPOTrainer, "compute_loss", "compute_loss")
wrap(trl.GRPOTrainer, "_generate_and_score_completions", "generate and score")
import torch

wrap(torch.Tensor, "backward", "backward")

if os.environ.get("SAVED") == "1":
    # SAVED=1: what the first update's forward keeps for the backward, by tensor shape (the
    # tensors autograd saves), and whether the model checkpoints its layers; then stop
    from collections import Counter
    forward = trl.GRPOTrainer._get_per_token_logps_and_entropies

    def tallied(self, model, *a, **k):
        saved = Counter()

        def pack(t):
            saved[(tuple(t.shape), str(t.dtype))] += t.numel() * t.element_size()
            return t
        inner = getattr(model, "module", model)
        print("gradient checkpointing:", getattr(inner, "is_gradient_checkpointing", None),
              "training:", inner.training, file=sys.stderr)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = forward(self, model, *a, **k)
        total = sum(saved.values())
        print(f"saved for backward: {total / 2**20:.0f} MB in {len(saved)} shapes", file=sys.stderr)
        for (shape, dtype), size in saved.most_common(12):
            print(f"  {size / 2**20:8.0f} MB  {shape} {dtype}", file=sys.stderr)
        if torch.is_grad_enabled():
            os._exit(0)
        return out
    trl.GRPOTrainer._get_per_token_logps_and_entropies = tallied
if os.environ.get("TILES"):
    from perfgym.train.lm_head_tiles import shrink_lm_head_tiles
    shrink_lm_head_tiles(*map(int, os.environ["TILES"].split(",")))
steps = int(os.environ.get("STEPS", "1"))
settings = grpo.GRPOSettings(model_path=None, task="dot", output_dir=sys.argv[1], steps=steps, G=2,
                             max_completion_length=48, lora=True, save_steps=1, engine="openvino",
                             turns=3, answer_start=True, prompt_op="improve", temperature=0.7,
                             gradient_checkpointing=os.environ.get("GC") == "1",
                             micro_batch=None if os.environ.get("GC") == "1" else 2,
                             low_memory=os.environ.get("LOW_MEMORY") == "1")
run = grpo.train(settings)
mark("end")
