"""Tokens per second of an int8 checkpoint (`perfgym model int8`) on vLLM's CPU build: run by
`shipped_engine_speed.py --engine vllm` with the Python of vLLM's own environment (vLLM pins
its own transformers), one JSON line a measurement.

    VLLM_PYTHON benchmarks/vllm_engine_speed.py CHECKPOINT IDS_JSON SAMPLES TOKENS [--no-amx]

The same request as the OpenVINO probe's: the search prompt's ids, a warm-up request that
leaves the prompt in the prefix cache, then S samples of one request decoded together, EOS
ignored, temperature 0.5. vLLM runs in this process (no engine-core process) on every core.

`--no-amx` measures what a CPU without AMX and BF16 would run: oneDNN is capped at AVX-512
with VNNI (ONEDNN_MAX_CPU_ISA, set by the caller before oneDNN loads) and vLLM's AMX int8
kernel is turned away (it reads torch's AMX check), so its oneDNN VNNI kernel runs, in FP32
activations: the issue's FP32-only Xeon kind, on a newer one. Where AMX is there and not turned
away, activations are bf16 (vLLM's AMX int8 kernel takes no other).
"""
from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    checkpoint, ids_path, samples, tokens = sys.argv[1:5]
    if "--no-amx" in sys.argv[5:] and not os.environ.get("ONEDNN_MAX_CPU_ISA"):
        sys.exit("--no-amx: set ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI in the environment too "
                 "(oneDNN reads it when it loads), or the int8 matmuls may use AMX")
    import torch
    if "--no-amx" in sys.argv[5:]:
        torch.cpu._is_amx_tile_supported = lambda: False  # vLLM's AMX kernels check this
    # vLLM's AMX int8 kernel takes bf16 activations only; its oneDNN VNNI one takes FP32
    dtype = "bfloat16" if torch.cpu._is_amx_tile_supported() else "float32"
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{os.cpu_count() - 1}")
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    from vllm import LLM, SamplingParams, TokensPrompt
    ids = json.loads(open(ids_path).read())
    llm = LLM(model=checkpoint, dtype=dtype, max_model_len=4096, enable_prefix_caching=True,
              max_num_seqs=64, seed=0, distributed_executor_backend="uni")
    prompt = TokensPrompt(prompt_token_ids=ids)
    llm.generate([prompt], SamplingParams(n=1, max_tokens=4, temperature=0.5), use_tqdm=False)
    for n in (int(s) for s in samples.split(",")):
        params = SamplingParams(n=n, max_tokens=int(tokens), ignore_eos=True, temperature=0.5,
                                seed=2)
        started = time.perf_counter()
        out = llm.generate([prompt], params, use_tqdm=False)[0]
        seconds = time.perf_counter() - started
        made = sum(len(o.token_ids) for o in out.outputs)
        print(json.dumps({"samples": n, "tok_s": made / seconds, "dtype": dtype}), flush=True)


if __name__ == "__main__":
    main()
