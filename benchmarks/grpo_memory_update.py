"""Peak resident memory of one shared-prefix forward and backward (train.shared_prefix) on the
default model with LoRA: P prompt tokens, C completion tokens, ROWS rows sharing the prompt.

    python benchmarks/grpo_memory_update.py P C ROWS [ATTN]   # MASK=1: a loss mask of three
                                                              # 48-token answer windows

The loss-mask figures in docs/training/train.md ("Memory": 3.51 GB without the mask, 3.24 GB
with it, P=755 C=600 ROWS=1) come from it.
"""
import os
import sys
import time
from pathlib import Path


def mem():
    d = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            k, v = line.split(":"); d[k] = int(v.split()[0]) // 1024
    return d
def reset():
    Path("/proc/self/clear_refs").write_text("5")
T0 = time.time()
def mark(what):
    m = mem(); print(f"[{time.time()-T0:6.1f}s] RSS {m['VmRSS']:6d} HWM {m['VmHWM']:6d}  {what}", flush=True)
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from perfgym.models import resolve_model
from perfgym.train.shared_prefix import shared_prefix_logps

P, C, rows = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
attn = sys.argv[4] if len(sys.argv) > 4 else None
kw = {"attn_implementation": attn} if attn else {}
model = AutoModelForCausalLM.from_pretrained(str(resolve_model()), **kw)
print("attn", model.config._attn_implementation, "dtype", model.dtype)
model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
    target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM"))
model.train()
torch.manual_seed(0)
prompt = torch.randint(100, 40000, (1, P)).expand(rows, P)
comp = torch.randint(100, 40000, (rows, C))
ids = torch.cat([prompt, comp], 1); mask = torch.ones_like(ids)
mark("loaded"); reset()
lm = None
if os.environ.get("MASK"):
    lm = torch.zeros(rows, C)
    for a in (0, C // 2, C - 48):
        lm[:, a:a + 48] = 1
logps, ent = shared_prefix_logps(model, ids, mask, C, compute_entropy=True, loss_mask=lm)
mark("after forward")
logps.sum().backward()
mark("after backward")
