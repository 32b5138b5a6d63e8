"""How closely the coder's int8 checkpoint (`perfgym model int8`) on vLLM's CPU build predicts
what the FP32 model predicts: next-token top-1 agreement and mean |d log p| of the actual next
token, teacher-forced over the dgemm search prompt followed by a verified dgemm answer from
`teacher_pairs.jsonl`. The FP32 model is the GGUF dequantized by transformers (what OpenVINO's
exact setting computes); bf16 activations on the FP32 weights are the yardstick.

    python benchmarks/int8_fidelity.py --vllm-python VENV/bin/python [--no-amx] [--json PATH]

The reference runs here; each engine row runs in vLLM's environment (`--engine-row`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def reference(gguf: Path, ids: list[int], tokenizer_dir: Path) -> dict:
    """The sequence and, at each position, the FP32 model's top token and the log p of the
    next one."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    pairs = [json.loads(line) for line in (HERE / "results/teacher_pairs.jsonl").open()]
    answer = next(p["fast"] for p in pairs if p["task"] == "dgemm")
    seq = ids + tok(f"```c\n{answer}```<|im_end|>", add_special_tokens=False)["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                 dtype=torch.float32)
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([seq])).logits[0].float(), -1)
    nxt = torch.tensor(seq[1:])
    return {"seq": seq, "top1": logp.argmax(-1)[:-1].tolist(),
            "actual": logp[torch.arange(len(seq) - 1), nxt].tolist()}


def engine_row(checkpoint: str, dtype: str, ref_path: str, no_amx: bool) -> None:
    """(In vLLM's environment.) One JSON line: this checkpoint's agreement with the reference."""
    if no_amx:
        import torch
        torch.cpu._is_amx_tile_supported = lambda: False
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB; else it asks for 92% of memory
    from vllm import LLM, SamplingParams, TokensPrompt
    ref = json.loads(Path(ref_path).read_text())
    seq = ref["seq"]
    llm = LLM(model=checkpoint, dtype=dtype, max_model_len=4096, enable_prefix_caching=False,
              distributed_executor_backend="uni")
    out = llm.generate([TokensPrompt(prompt_token_ids=seq)],
                       SamplingParams(max_tokens=1, prompt_logprobs=1), use_tqdm=False)[0]
    agree = diff = 0.0
    for i, probs in enumerate(out.prompt_logprobs[1:]):  # i: log p of seq[i + 1]
        top = max(probs.items(), key=lambda kv: kv[1].logprob)[0]
        agree += top == ref["top1"][i]
        diff += abs(probs[seq[i + 1]].logprob - ref["actual"][i])
    n = len(seq) - 1
    print(json.dumps({"dtype": dtype, "positions": n, "top1_agreement": agree / n,
                      "mean_abs_dlogp": diff / n}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", default="python")
    ap.add_argument("--no-amx", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--engine-row", nargs=3, metavar=("CHECKPOINT", "DTYPE", "REF"))
    args = ap.parse_args()
    if args.engine_row:
        engine_row(*args.engine_row, no_amx=args.no_amx)
        return
    sys.path.insert(0, str(HERE))
    from results_by_machine import machine
    from perfgym.engine.int8_checkpoint import write_checkpoint
    from perfgym.engine.vllm_engine import int8_checkpoint
    from perfgym.models import shipped_engine_gguf
    from perfgym.policies.openvino import search_prompt_ids
    gguf = shipped_engine_gguf("coder")
    int8 = int8_checkpoint(gguf)
    env = dict(os.environ)
    if args.no_amx:
        env["ONEDNN_MAX_CPU_ISA"] = "AVX512_CORE_VNNI"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = Path(tmp) / "ref.json"
        ref_path.write_text(json.dumps(reference(gguf, search_prompt_ids(gguf), int8)))
        fp32 = Path(tmp) / "fp32"  # the bf16 yardstick: the same weights, unquantized
        write_checkpoint(gguf, fp32, int8=False)
        for checkpoint, dtype, name in ((int8, "float32" if args.no_amx else "bfloat16",
                                         "int8 W8A8"), (fp32, "bfloat16", "bf16")):
            done = subprocess.run([args.vllm_python, __file__, "--engine-row", str(checkpoint),
                                   dtype, str(ref_path)] + (["--no-amx"] if args.no_amx
                                                            else []),
                                  env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"vLLM's run failed: {done.stderr.strip().splitlines()[-1:]}")
            row = json.loads([x for x in done.stdout.splitlines() if x.startswith("{")][-1])
            rows.append({"weights": name, **row})
            print(f"{name:10s} activations {row['dtype']:9s} top-1 agreement "
                  f"{row['top1_agreement']:.1%}, mean |d log p| {row['mean_abs_dlogp']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({**machine(every_flag=True), "rows": rows,
                                               "emulated": "no-amx" if args.no_amx else None},
                                              indent=2) + "\n")


if __name__ == "__main__":
    main()
