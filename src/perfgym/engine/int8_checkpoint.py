"""A GGUF model written again as an int8 checkpoint for vLLM's CPU engine (W8A8).

Why: on a CPU without BF16, OpenVINO GenAI decodes the coder's search batch (8 samples of one
prompt) at 17-29 tokens/s in FP32. vLLM's CPU build multiplies int8 weights by int8
activations (quantized per token as they come) with oneDNN's VNNI kernels, a quarter of the
bytes and four times the arithmetic of FP32. vLLM does not read a GGUF on a CPU, so the GGUF's
weights are dequantized (by transformers) and rounded again to int8, per output channel,
symmetric: every linear layer's, the output layer's too (left in FP32 it took a quarter of a
decode step). The embedding, the norms and the biases stay FP32.

The checkpoint is compressed-tensors' "int-quantized" format, which vLLM reads:
`weight` int8 [out, in], `weight_scale` FP32 [out, 1]; activations dynamic, per token.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

MARKER = "perfgym_int8"  # config.json key: what wrote the checkpoint and from which file


def int8_per_channel(weight: Any) -> tuple[Any, Any]:
    """(int8 weight, FP32 scale [out, 1]): each row rounded to the nearest of 255 levels
    spanning ±its largest magnitude. A row of zeros gets scale 1 (its codes are 0 anyway)."""
    import torch
    w = weight.detach().to(torch.float32)
    peak = w.abs().amax(dim=1, keepdim=True)
    scale = torch.where(peak > 0, peak / 127.0, torch.ones_like(peak))
    codes = torch.round(w / scale).clamp_(-127, 127).to(torch.int8)
    return codes, scale


def quantization_config(with_output_layer: bool) -> dict[str, Any]:
    """compressed-tensors' description of the checkpoint: int8 weights per channel, int8
    activations per token at run time, on every linear layer (vLLM's output layer is not a
    Linear, so it is named)."""
    return {
        "quant_method": "compressed-tensors", "format": "int-quantized",
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"] + (["re:.*lm_head$"] if with_output_layer else []),
            "weights": {"num_bits": 8, "type": "int", "symmetric": True,
                        "strategy": "channel", "dynamic": False},
            "input_activations": {"num_bits": 8, "type": "int", "symmetric": True,
                                  "strategy": "token", "dynamic": True}}},
        "ignore": []}


def stored_source(out: Path) -> dict[str, Any] | None:
    """What a finished checkpoint in `out` was written from, or None if there is none."""
    try:
        config = json.loads((out / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not (out / "model.safetensors").exists():
        return None
    return config.get(MARKER)


def write_int8_checkpoint(gguf: str | Path, out: str | Path) -> Path:
    """Write `gguf` to `out` as an int8 W8A8 checkpoint (once: a finished one from the same
    file is kept). Whole or not at all: written beside `out`, then renamed."""
    gguf, out = Path(gguf).resolve(), Path(out)
    source = {"gguf": gguf.name, "size": gguf.stat().st_size}
    if stored_source(out) == source:
        return out
    return write_checkpoint(gguf, out, int8=True, source=source)


def write_checkpoint(gguf: str | Path, out: str | Path, int8: bool = True,
                     source: dict[str, Any] | None = None) -> Path:
    """Write `gguf` to `out` for vLLM: int8 W8A8 (`int8`), else the dequantized FP32 weights
    (int8's yardstick). Whole or not at all: written beside `out`, then renamed."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf, out = Path(gguf).resolve(), Path(out)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                 dtype=torch.float32)
    linears = [name for name, module in model.named_modules()
               if int8 and isinstance(module, torch.nn.Linear)]
    tensors: dict[str, Any] = {}
    for name, tensor in model.state_dict().items():
        module = name.rsplit(".", 1)[0]
        if module in linears and name.endswith(".weight"):
            codes, scale = int8_per_channel(tensor)
            tensors[name], tensors[f"{module}.weight_scale"] = codes, scale
        else:
            tensors[name] = tensor.detach().to(torch.float32).contiguous().clone()
    config = model.config
    if getattr(config, "quantization_config", None) is not None:
        del config.quantization_config  # transformers' note that it read a GGUF
    config.tie_word_embeddings = False  # the output layer is written apart from the embedding
    config.architectures = [type(model).__name__]
    config.dtype = "float32"
    del model
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(tmp)
    if int8:
        written = json.loads((tmp / "config.json").read_text())
        written["quantization_config"] = quantization_config("lm_head" in linears)
        written[MARKER] = source or {"gguf": gguf.name, "size": gguf.stat().st_size}
        (tmp / "config.json").write_text(json.dumps(written, indent=2) + "\n")
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out
