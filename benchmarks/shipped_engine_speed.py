"""Tokens per second of a model run as shipped on the fast engine, by precision and prefix
caching, in one run: the measurement behind `perfgym.engine.search_settings`.

    python benchmarks/shipped_engine_speed.py [--model coder] [--batches 1,8,32] [--tokens 96]
                                              [--json benchmarks/results/shipped_engine_speed.json]

The prompt is perfgym's improve prompt for dgemm (what search sends). A batch of B is B requests
of that prompt, one sample each, as search's candidates of one step are: with prefix caching the
shared prompt is computed once. EOS is ignored, so every setting generates the same count.
Settings: `exact` (FP32 compute and KV cache, what training needs) against the engine's own
precisions (bf16 where the CPU has it, a u8 KV cache), each with prefix caching off and on.
"""
from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="coder")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from perfgym.machine import cpu_model
    from perfgym.engine.openvino import OpenVINOEngine
    from perfgym.models import model_identity, shipped_engine_gguf
    from perfgym.policies.openvino import gguf_tokenizer
    from perfgym.prompts import expand_prompt
    from perfgym.tasks import get_task

    gguf = shipped_engine_gguf(args.model)
    if gguf is None:
        raise SystemExit(f"{args.model}: not a GGUF run as shipped (a name or a .gguf path)")
    tokenizer = gguf_tokenizer(gguf)
    task = get_task("dgemm")
    prompt = expand_prompt(task, "improve", task.baseline.read_text(), None)
    ids = tokenizer(tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                  tokenize=False, add_generation_prompt=True))
    ids = ids["input_ids"]
    rows = []
    for exact in (True, False):
        for caching in (False, True):
            engine = OpenVINOEngine(gguf, cache_gb=2, exact=exact, prefix_caching=caching)
            engine.generate([ids], 1, max_tokens=8, temperature=0.5, seed=1)  # warm
            for batch in (int(b) for b in args.batches.split(",")):
                started = time.perf_counter()
                groups = engine.generate([ids] * batch, 1, max_tokens=args.tokens,
                                         temperature=0.5, top_p=0.95, seed=batch,
                                         ignore_eos=True)
                seconds = time.perf_counter() - started
                tokens = sum(len(s.ids) for g in groups for s in g)
                row = {"exact": exact, "prefix_caching": caching, "batch": batch,
                       "prompt_tokens": len(ids), "tokens": tokens, "seconds": seconds,
                       "tok_s": tokens / seconds, "load_average": os.getloadavg()[0]}
                rows.append(row)
                print(f"exact={exact!s:5} caching={caching!s:5} batch {batch:3d}: "
                      f"{row['tok_s']:6.1f} tok/s ({tokens} tokens, {seconds:.1f} s)", flush=True)
            engine.close()
    result = {"model": model_identity(args.model), "cpu": cpu_model(), "cores": os.cpu_count(),
              "tokens_per_sequence": args.tokens, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
