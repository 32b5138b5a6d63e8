"""The fast engine's settings for a GGUF as shipped, chosen on the machine that runs them.

A figure holds on the machine it was measured on: the engine's own precisions made the coder
3.7x faster than exact FP32 on an AMD EPYC with AVX-512 BF16 (bf16 compute) and gained nothing
on an FP32-only Intel Xeon. So the first search on a machine measures each candidate setting
here (a short generation of a search's batch: 8 samples of one prompt), takes the fastest, and
stores the figures beside the machine's other facts (`cache_dir()/engine/`), keyed by the
machine's fingerprint and the model's file. A later search reads the choice.

Where vLLM's CPU build is installed (engine/vllm_engine.py), the coder's int8 copy on it is one
more candidate: on a CPU without BF16 it decoded the search's batch about twice as fast as
OpenVINO's FP32. Installing it later measures again (the candidates are part of the key).
It is measured last, told the rate it must reach to be chosen, and stopped once it cannot: on
an AVX2 CPU without VNNI its int8 matmuls ran oneDNN's reference GEMM, no answer to the
probe's request in 13 minutes.

The engine's own precisions stay the choice unless another setting is at least `MARGIN`
faster: the probe is short and the machine may be busy, and a setting that wins by less is not
shown to win.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

from ..paths import cache_dir

# name -> OpenVINO properties. "engine": the engine's own precisions (bf16 compute where the
# CPU has it, an 8-bit KV cache, int8 dynamic quantization of activations); "exact": FP32
# compute and KV cache (training's setting); "kv_f16": the engine's own with a 16-bit KV cache
# (its u8 cache is (de)quantized on every read)
CANDIDATES: dict[str, dict[str, Any]] = {
    "engine": {},
    "exact": {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32",
              "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0},
    "kv_f16": {"KV_CACHE_PRECISION": "f16"},
}
VLLM = "vllm_int8"  # the candidate that is another engine: vLLM on the int8 checkpoint
DEFAULT = "engine"
MARGIN = 1.15
SAMPLES = 8  # a search round's batch: samples of one prompt
TOKENS = 64  # new tokens per sample (EOS ignored): the decode rate, briefly

PROBE_VERSION = 2  # a probe that measures otherwise chooses anew

# (gguf, properties) -> tokens per second; vLLM's is also given `beat`, the rate that wins
Measure = Callable[..., float]


def candidates() -> dict[str, dict[str, Any]]:
    """OpenVINO's settings, and vLLM where it is installed (properties {"engine": "vllm"})."""
    from .vllm_engine import vllm_python
    return {**CANDIDATES, **({VLLM: {"engine": "vllm"}} if vllm_python() else {})}


def choice_path(gguf: Path) -> Path:
    from ..machine import fingerprint
    stat = gguf.stat()
    engines = "-vllm" if VLLM in candidates() else ""
    key = f"{fingerprint()['id']}-{gguf.name}-{stat.st_size}-v{PROBE_VERSION}{engines}"
    return cache_dir() / "engine" / f"{key}.json"


def engine_settings(gguf: str | Path, measure: Measure,
                    say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The stored choice for this machine and model, probing once where there is none:
    {"name", "properties", "rows": [{"name", "tok_s"}], "cpu", "isa", "measured_at"}."""
    gguf = Path(gguf)
    path = choice_path(gguf)
    options = candidates()
    try:
        stored = json.loads(path.read_text())
        if stored.get("name") in options:
            return {**stored, "properties": options[stored["name"]]}
    except (OSError, ValueError):
        pass  # none yet, or damaged: measure
    if say:
        say(f"choosing the engine's settings for this CPU (once per machine and model: "
            f"{len(options)} short runs{', vLLM among them' if VLLM in options else ''})")
    choice = probe(gguf, measure, options)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(choice, indent=2))
    tmp.replace(path)  # whole or not at all: a concurrent first use reads one or the other
    return {**choice, "properties": options[choice["name"]]}


def probe(gguf: Path, measure: Measure,
          options: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Each candidate's tokens per second; the fastest by MARGIN over the default, else the
    default. vLLM failing to run is a row with its error and no speed, not a failed search."""
    from ..machine import fingerprint
    from .openvino import EngineUnavailable
    rows = []
    for name, props in (options or CANDIDATES).items():  # OpenVINO's first: vLLM's `beat`
        try:
            if name == VLLM:
                rate = {r["name"]: r["tok_s"] for r in rows}
                beat = max([*rate.values(), rate.get(DEFAULT, 0.0) * MARGIN]) or None
                rows.append({"name": name, "tok_s": measure(gguf, props, beat=beat)})
            else:
                rows.append({"name": name, "tok_s": measure(gguf, props)})
        except EngineUnavailable as exc:
            if name != VLLM:
                raise
            rows.append({"name": name, "tok_s": 0.0, "error": str(exc)[:500]})
    name = _by_margin({r["name"]: r["tok_s"] for r in rows})
    fp = fingerprint()
    return {"name": name, "rows": rows, "cpu": fp["cpu"], "isa": fp["isa"],
            "samples": SAMPLES, "tokens": TOKENS, "measured_at": time.time()}


def openvino_choice(rows: list[dict[str, Any]]) -> str:
    """OpenVINO's setting among a probe's rows, by the probe's rule (the fastest by MARGIN over
    the default, else the default): what runs where vLLM was taken and then fails."""
    rate = {r["name"]: r["tok_s"] for r in rows if r["name"] in CANDIDATES}
    return _by_margin(rate) if DEFAULT in rate else DEFAULT


def _by_margin(rate: dict[str, float]) -> str:
    best = max(rate, key=rate.get)
    return best if rate[best] >= rate[DEFAULT] * MARGIN else DEFAULT


def measure_tok_s(gguf: Path, props: dict[str, Any], ids: list[int],
                  samples: int = SAMPLES, tokens: int = TOKENS) -> float:
    """Tokens per second of `samples` samples of the prompt `ids` (a search step's: the
    policy's `search_prompt_ids`), prefix caching on, after a warm-up request of the same
    prompt: the first request pays one-time costs and computes the prompt, which the timed one
    reads from the prefix cache, so the time is the decoding of a batch of samples, where the
    settings differ (a search's answers are 150-300 tokens each, its prompt computed once a
    round)."""
    import numpy as np
    import openvino as ov
    import openvino_genai as og

    scheduler = og.SchedulerConfig()
    scheduler.cache_size = 2
    scheduler.enable_prefix_caching = True
    pipe = og.ContinuousBatchingPipeline(str(gguf), scheduler, "CPU", dict(props))

    def run(n: int, new: int, seed: int) -> int:
        cfg = og.GenerationConfig()
        cfg.max_new_tokens, cfg.apply_chat_template, cfg.ignore_eos = new, False, True
        cfg.do_sample, cfg.temperature, cfg.num_return_sequences = True, 0.5, n
        cfg.rng_seed = seed
        handle = pipe.add_request(seed, ov.Tensor(np.array([ids], dtype=np.int64)), cfg)
        while pipe.has_non_finished_requests():
            pipe.step()
        return sum(len(o.generated_ids) for o in handle.read_all())

    run(1, 4, 1)
    started = time.perf_counter()
    made = run(samples, tokens, 2)
    seconds = time.perf_counter() - started
    del pipe
    return made / seconds
