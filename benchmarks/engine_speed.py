"""Generation speed of the fast CPU engine against transformers' `generate`, in one run.

    python benchmarks/engine_speed.py [--batches 1,4,16,64] [--tokens 256] [--json [OUT]]

Same model (the default, SmolLM2-135M-Instruct, with the weights the trainer holds), one prompt,
`--tokens` new tokens per sequence (EOS ignored, so both generate the same count), sampling at
T=0.7, top-p 0.95. Prints tokens per second per batch size and the ratio; the goal is >= 4x at
the batch sizes search (8-16) and GRPO (16-64) use. Also times what a GRPO step pays to hand the
engine new weights (write the GGUF, load it). Run it on a quiet machine: it measures wall time.
"""
from __future__ import annotations

import argparse
import time

from results_by_machine import json_flag, record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,4,16,64")
    ap.add_argument("--tokens", type=int, default=256)
    json_flag(ap, "engine_speed")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]

    import os
    import torch

    from perfgym.engine.openvino import OpenVINOEngine
    from perfgym.models import resolve_model, shipped_gguf
    from perfgym.policies.hf import load_model

    model, tokenizer = load_model(resolve_model(None))
    model.eval()
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a fast C function that multiplies two n x n "
                                     "matrices of doubles."}], tokenize=False,
        add_generation_prompt=True)
    ids = tokenizer(text)["input_ids"]
    template = shipped_gguf()

    started = time.perf_counter()
    engine = OpenVINOEngine(template)
    first_load = time.perf_counter() - started
    started = time.perf_counter()
    engine.load_weights(model.state_dict(), template)
    sync = time.perf_counter() - started

    rows = []
    for batch in batches:
        t0 = time.perf_counter()
        with torch.no_grad():
            enc = torch.tensor([ids] * batch)
            out = model.generate(enc, attention_mask=torch.ones_like(enc), do_sample=True,
                                 temperature=0.7, top_p=0.95, top_k=0,
                                 max_new_tokens=args.tokens, min_new_tokens=args.tokens,
                                 pad_token_id=tokenizer.eos_token_id)
        hf_seconds = time.perf_counter() - t0
        hf_tokens = (out.shape[1] - len(ids)) * batch
        t0 = time.perf_counter()
        groups = engine.generate([ids], batch, max_tokens=args.tokens, temperature=0.7,
                                 top_p=0.95, seed=batch, ignore_eos=True)
        ov_seconds = time.perf_counter() - t0
        ov_tokens = sum(len(s.ids) for s in groups[0])
        row = {"batch": batch, "transformers_tok_s": hf_tokens / hf_seconds,
               "engine_tok_s": ov_tokens / ov_seconds}
        row["ratio"] = row["engine_tok_s"] / row["transformers_tok_s"]
        rows.append(row)
        print(f"batch {batch:3d}: transformers {row['transformers_tok_s']:7.1f} tok/s, engine "
              f"{row['engine_tok_s']:7.1f} tok/s, {row['ratio']:.2f}x", flush=True)
    engine.close()
    print(f"engine: first load {first_load:.2f} s; new weights (write GGUF + load) {sync:.2f} s")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    if args.json:
        result = {"tokens": args.tokens, "rows": rows, "first_load_s": first_load,
                  "weight_sync_s": sync, "load_average": os.getloadavg()[0]}
        record("engine_speed", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    out = {f"batch {r['batch']}, tok/s engine / transformers":
           f"{r['engine_tok_s']:.1f} / {r['transformers_tok_s']:.1f} ({r['ratio']:.2f}x)"
           for r in result["rows"]}
    out["new weights (write GGUF, load)"] = f"{result['weight_sync_s']:.1f} s"
    return out


if __name__ == "__main__":
    main()
