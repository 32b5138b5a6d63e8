"""A Llama-architecture model's weights, written as a GGUF that an inference engine loads.

The engine (OpenVINO GenAI) reads GGUF files directly, but has no way to take new weights into
a loaded model: LoRA adapters are not applied to a model read from GGUF. So after each training
update the trained weights (LoRA merged in) are written as a new GGUF and the engine reloads it.
Everything but the tensors (architecture, hyper-parameters, the tokenizer, the chat template)
is copied from a template GGUF of the same architecture: the default model's own file.

Tensors are written in F16 (norms in F32, as llama.cpp does). The query and key projections are
permuted as llama.cpp's converter permutes them (rotary pairs interleaved); `check_mapping`
compares the result with the template's own tensors, so a wrong mapping cannot pass unseen.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

# GGUF block tensor -> transformers parameter, for the Llama architecture
_BLOCK = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
          "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
          "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight"}


class GGUFWriteError(ValueError):
    """The weights do not fit the template (another architecture or shape)."""


def hf_name(gguf_name: str) -> str:
    if gguf_name in _TOP:
        return _TOP[gguf_name]
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", gguf_name)
    if not m or m.group(2) not in _BLOCK:
        raise GGUFWriteError(f"no transformers parameter for GGUF tensor {gguf_name!r}")
    return f"model.layers.{m.group(1)}.{_BLOCK[m.group(2)]}.weight"


def permute_rotary(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's order for a query/key projection's rows: per head, the two rotary halves
    interleaved."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(
        w.shape)


def gguf_tensors(state: dict[str, Any], heads: int, kv_heads: int,
                 names: list[str]) -> dict[str, np.ndarray]:
    """The GGUF tensors named `names`, made from a transformers state dict (tensors or
    arrays), each as llama.cpp lays it out."""
    out = {}
    for name in names:
        key = hf_name(name)
        if key not in state and name == "output.weight":  # tied embeddings
            key = "model.embed_tokens.weight"
        if key not in state:
            raise GGUFWriteError(f"the weights have no {key} for GGUF tensor {name}")
        value = state[key]
        w = value.detach().float().cpu().numpy() if hasattr(value, "detach") else \
            np.asarray(value, dtype=np.float32)
        if name.endswith("attn_q.weight"):
            w = permute_rotary(w, heads)
        elif name.endswith("attn_k.weight"):
            w = permute_rotary(w, kv_heads)
        out[name] = w
    return out


def _field_value(field) -> Any:
    return field.contents()


def write_gguf(state: dict[str, Any], template: str | Path, out: str | Path) -> Path:
    """Write `state` (a transformers Llama state dict) as a GGUF at `out`, with every key and
    the tensor list of `template`. Returns `out`."""
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

    reader = GGUFReader(str(template))
    arch = _field_value(reader.fields["general.architecture"])
    if arch != "llama":
        raise GGUFWriteError(f"{template} is a {arch!r} model; only llama is written")
    heads = int(_field_value(reader.fields["llama.attention.head_count"]))
    kv_heads = int(_field_value(reader.fields["llama.attention.head_count_kv"]))
    names = [t.name for t in reader.tensors]
    tensors = gguf_tensors(state, heads, kv_heads, names)
    for t in reader.tensors:
        want = tuple(int(d) for d in reversed(t.shape.tolist()))  # GGUF lists dims inner first
        got = tensors[t.name].shape if tensors[t.name].ndim > 1 else (tensors[t.name].shape[0],)
        if tuple(got) != want[-len(got):] or int(np.prod(got)) != int(np.prod(want)):
            raise GGUFWriteError(f"{t.name}: the weights have shape {got}, the template {want}")

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    writer = GGUFWriter(str(tmp), arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue  # the writer writes these itself
        value = _field_value(field)
        if key == "general.file_type":
            value = 1  # mostly F16
        vtype = GGUFValueType(field.types[0])
        sub = GGUFValueType(field.types[-1]) if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(key, value, vtype, sub_type=sub)
    for name in names:
        w = tensors[name]
        writer.add_tensor(name, w.astype(np.float32 if w.ndim == 1 else np.float16),
                          raw_dtype=GGMLQuantizationType.F32 if w.ndim == 1
                          else GGMLQuantizationType.F16)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)  # a reader never sees half a file
    return out


def check_mapping(state: dict[str, Any], template: str | Path, tolerance: float = 1e-3) -> float:
    """The largest difference between `state` laid out as GGUF tensors and `template`'s own
    tensors (dequantized): near 0 when `state` was converted from `template`."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(str(template))
    heads = int(_field_value(reader.fields["llama.attention.head_count"]))
    kv_heads = int(_field_value(reader.fields["llama.attention.head_count_kv"]))
    tensors = gguf_tensors(state, heads, kv_heads, [t.name for t in reader.tensors])
    worst = 0.0
    for t in reader.tensors:
        ref = dequantize(t.data, t.tensor_type).reshape(tensors[t.name].shape)
        worst = max(worst, float(np.max(np.abs(ref - tensors[t.name]))))
    return worst
