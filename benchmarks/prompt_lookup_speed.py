"""Answers per second of the coder with and without prompt-lookup decoding, on this machine.

    python benchmarks/prompt_lookup_speed.py [--model coder] [--settings engine,engine_f32]
                                             [--requests 8] [--max-tokens 768] [--json [OUT]]

Why: a search's answer is mostly its parent kernel written again with a change, and OpenVINO
GenAI's prompt lookup drafts the next tokens from the prompt's own n-grams and checks several
of them in one forward pass. On a CPU where a step of 8 sequences is bound by compute (FP32
compute: an Intel without BF16 decodes the coder at 19.4 tok/s for 8 samples, issue 49), a
step that accepts k drafted tokens makes k tokens for about the price of one, if the drafts
are right often enough.

What is timed, per setting and mode: the search's request, perfgym's dgemm improve prompt with
the coder's sampling (temperature 0.3, top-p 0.95, its token limit, EOS ends an answer), as
`--requests` requests of one sample each (prompt lookup takes no `num_return_sequences`), all
added before the first step, prefix caching on, after a warm-up request of the same prompt.
`plain` is the same requests without lookup; `one_request` is the search's current form, one
request with `--requests` return sequences. A row gives tokens per second, answers per
minute, the answers' mean length and the share that ended at EOS (an answer cut at the limit
is rarely a kernel). Settings: perfgym.engine.probe's candidates, and `engine_f32`, the
engine's own precisions with FP32 compute: what "engine" is on a CPU without BF16.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_by_machine import json_flag, record  # noqa: E402

EXTRA_SETTINGS = {"engine_f32": {"INFERENCE_PRECISION_HINT": "f32"}}
MODES = ("one_request", "plain", "lookup")


def timed_run(gguf: Path, props: dict, ids: list[int], mode: str, requests: int,
              max_tokens: int, ngram: int, drafts: int) -> dict:
    """One pipeline, a warm-up request, then `requests` answers of the prompt `ids`."""
    import numpy as np
    import openvino as ov
    import openvino_genai as og

    from perfgym.models import CODER_SAMPLING
    scheduler = og.SchedulerConfig()
    scheduler.cache_size = 2
    scheduler.enable_prefix_caching = True
    pipe_props = dict(props, **({"prompt_lookup": True} if mode == "lookup" else {}))
    pipe = og.ContinuousBatchingPipeline(str(gguf), scheduler, "CPU", pipe_props)

    def config(n: int, new: int, seed: int):
        cfg = og.GenerationConfig()
        cfg.max_new_tokens, cfg.apply_chat_template = new, False
        cfg.do_sample, cfg.temperature = True, CODER_SAMPLING["temperature"]
        cfg.top_p, cfg.num_return_sequences, cfg.rng_seed = CODER_SAMPLING["top_p"], n, seed
        if mode == "lookup":
            cfg.max_ngram_size, cfg.num_assistant_tokens = ngram, drafts
        return cfg

    def run(configs: list) -> list:
        handles = [pipe.add_request(i, ov.Tensor(np.array([ids], dtype=np.int64)), cfg)
                   for i, cfg in enumerate(configs)]
        while pipe.has_non_finished_requests():
            pipe.step()
        return [o for h in handles for o in h.read_all()]

    run([config(1, 4, 1)])
    configs = ([config(requests, max_tokens, 2)] if mode == "one_request"
               else [config(1, max_tokens, 2 + i) for i in range(requests)])
    started = time.perf_counter()
    outputs = run(configs)
    seconds = time.perf_counter() - started
    del pipe
    lengths = [len(o.generated_ids) for o in outputs]
    at_eos = sum(1 for o in outputs if "length" not in str(o.finish_reason).lower())
    return {"tok_s": sum(lengths) / seconds, "answers_per_min": 60 * len(outputs) / seconds,
            "seconds": seconds, "answers": len(outputs),
            "mean_tokens": sum(lengths) / len(lengths), "ended_at_eos": at_eos / len(outputs)}


def summarize(rows: list[dict]) -> dict[str, str]:
    """Per setting: tokens per second of each mode, and lookup's answers per minute against
    the search's current form (one request of several samples)."""
    summary = {}
    for name in dict.fromkeys(r["setting"] for r in rows):
        by = {r["mode"]: r for r in rows if r["setting"] == name}
        summary[f"{name}: tok/s ({', '.join(by)})"] = " / ".join(
            f"{r['tok_s']:.1f}" for r in by.values())
        if "lookup" in by and "one_request" in by:
            summary[f"{name}: lookup / one request (answers/min)"] = (
                f"{by['lookup']['answers_per_min'] / by['one_request']['answers_per_min']:.2f}x")
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="coder")
    ap.add_argument("--settings", default="engine,engine_f32",
                    help="comma-separated: perfgym.engine.probe.CANDIDATES or engine_f32")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="default: the coder's own limit")
    ap.add_argument("--ngram", type=int, default=3, help="prompt lookup's longest n-gram")
    ap.add_argument("--drafts", type=int, default=5, help="tokens drafted per step")
    json_flag(ap, "prompt_lookup_speed")
    args = ap.parse_args()

    from perfgym.engine.probe import CANDIDATES
    from perfgym.models import CODER_SAMPLING, shipped_engine_gguf
    from perfgym.policies.openvino import search_prompt_ids
    settings = {**CANDIDATES, **EXTRA_SETTINGS}
    names = args.settings.split(",")
    modes = args.modes.split(",")
    for bad in [n for n in names if n not in settings] + [m for m in modes if m not in MODES]:
        raise SystemExit(f"unknown setting or mode {bad!r}: settings {', '.join(settings)}; "
                         f"modes {', '.join(MODES)}")
    gguf = shipped_engine_gguf(args.model)
    if gguf is None:
        raise SystemExit(f"{args.model}: not a GGUF run as shipped (a name or a .gguf path)")
    max_tokens = args.max_tokens or CODER_SAMPLING["max_tokens"]
    ids = search_prompt_ids(gguf)
    rows = []
    for name in names:
        for mode in modes:
            row = {"setting": name, "properties": settings[name], "mode": mode,
                   "requests": args.requests, "max_tokens": max_tokens,
                   **({"ngram": args.ngram, "drafts": args.drafts} if mode == "lookup" else {}),
                   **timed_run(gguf, settings[name], ids, mode, args.requests, max_tokens,
                               args.ngram, args.drafts)}
            rows.append(row)
            print(f"{name:10s} {mode:11s} {row['tok_s']:6.1f} tok/s  "
                  f"{row['answers_per_min']:5.1f} answers/min  mean {row['mean_tokens']:.0f} "
                  f"tokens, {row['ended_at_eos']:.0%} at EOS", flush=True)
    summary = summarize(rows)
    for line in summary.items():
        print(*line, sep=": ")
    if args.json:
        record("prompt_lookup_speed", {"prompt": "dgemm improve", "rows": rows}, summary,
               args.json)


if __name__ == "__main__":
    main()
