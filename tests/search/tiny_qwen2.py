"""A tiny random qwen2 GGUF (the coder's architecture) with a real model's tokenizer, for tests
of what reads a GGUF: the fast engine, the int8 checkpoint."""
from __future__ import annotations

import numpy as np

# head size 64: vLLM's CPU attention takes no smaller
HIDDEN, HEADS, KV_HEADS, FFN, LAYERS = 128, 2, 1, 256, 2


def write_tiny_qwen2(path, template):
    """A random qwen2 GGUF (F16 matrices, F32 vectors: the types the engine reads) with
    `template`'s tokenizer keys."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    reader = GGUFReader(str(template))
    writer = GGUFWriter(str(path), "qwen2")
    vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = GGUFValueType(field.types[0])
        sub = GGUFValueType(field.types[-1]) if vtype == GGUFValueType.ARRAY else None
        value = field.contents()
        if key == "tokenizer.ggml.tokens":
            vocab = len(value)
        writer.add_key_value(key, value, vtype, sub_type=sub)
    writer.add_context_length(512)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(1)
    rng = np.random.default_rng(7)
    kv = KV_HEADS * HIDDEN // HEADS

    def add(name, *shape, ones=False):
        data = np.ones(shape, np.float32) if ones else \
            (rng.standard_normal(shape) * 0.5).astype(np.float32)
        writer.add_tensor(name, data.astype(np.float16) if data.ndim > 1 else data)

    add("token_embd.weight", vocab, HIDDEN)
    for i in range(LAYERS):
        add(f"blk.{i}.attn_norm.weight", HIDDEN, ones=True)
        add(f"blk.{i}.attn_q.weight", HIDDEN, HIDDEN)
        add(f"blk.{i}.attn_q.bias", HIDDEN)
        add(f"blk.{i}.attn_k.weight", kv, HIDDEN)
        add(f"blk.{i}.attn_k.bias", kv)
        add(f"blk.{i}.attn_v.weight", kv, HIDDEN)
        add(f"blk.{i}.attn_v.bias", kv)
        add(f"blk.{i}.attn_output.weight", HIDDEN, HIDDEN)
        add(f"blk.{i}.ffn_norm.weight", HIDDEN, ones=True)
        add(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        add(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        add(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    add("output_norm.weight", HIDDEN, ones=True)
    add("output.weight", vocab, HIDDEN)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
