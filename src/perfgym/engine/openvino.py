"""The fast CPU generation engine: OpenVINO GenAI's continuous-batching pipeline.

Why this engine (measured on this project's 2-core machines, `benchmarks/engine_speed.py`):
OpenVINO GenAI generates several times faster than transformers' `generate` at every batch size
search and GRPO use, installs from PyPI as binary wheels, reads GGUF files itself (no export
tool, whose pins clash with ours), and batches a whole GRPO step (every group of every prompt)
in one call. CTranslate2 was slower at batch 16-64; llama-cpp-python has no binary wheel.

The engine runs a GGUF. For the default model that is a GGUF written from the very weights the
trainer holds (`gguf_write.py`), so trainer and engine share their weights exactly; after a
training update `load_weights` writes the new weights and reloads (LoRA adapters are not applied
to a model read from GGUF). Compute runs in FP32 with an FP32 KV cache, so greedy answers match
transformers' token for token (tests/training/test_engine.py); the default lower precisions
(bf16 on AVX-512 parts, a u8 KV cache) change answers after a few tokens.
"""
from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# FP32 compute and KV cache: the engine's samples come from the trainer's own distribution
EXACT = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32",
         "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}


class EngineUnavailable(RuntimeError):
    """OpenVINO GenAI is not installed, or the model is not a GGUF it reads."""


def available() -> bool:
    import importlib.util
    return importlib.util.find_spec("openvino_genai") is not None


@dataclass
class Sample:
    """One generated sequence: its token ids, each token's log-probability under the sampler,
    and why it stopped ("stop" at EOS, "length" at the token limit)."""

    ids: list[int]
    logprobs: list[float]
    finish: str


class OpenVINOEngine:
    """Generates from a GGUF with OpenVINO GenAI; `load_weights` swaps in new weights."""

    def __init__(self, gguf: str | Path | None, threads: int | None = None,
                 cache_gb: int = 1, exact: bool = True, prefix_caching: bool = False,
                 properties: dict[str, Any] | None = None) -> None:
        """`exact`: FP32 compute and KV cache (training: samples from the trainer's own
        distribution); off, the engine's own precisions (search: a GGUF as shipped is no
        trainer's copy). `prefix_caching`: a prompt's KV blocks are reused by later requests
        that start with it (every candidate of a search step shares its prompt).
        `properties`: OpenVINO's own, where not `exact` (engine.probe's choice).
        `gguf` None: no model until `load_weights` (a trainer's engine: compiling a file only
        to replace it at once is seconds and a model's memory thrown away)."""
        if not available():
            raise EngineUnavailable("the fast engine needs OpenVINO GenAI: "
                                    "pip install 'perfgym[local]'")
        self.threads, self.cache_gb = threads, cache_gb
        self.exact, self.prefix_caching = exact, prefix_caching
        self.properties = dict(properties or {})
        self._owned: Path | None = None  # a GGUF this engine wrote, removed on the next load
        self.pipe, self.gguf = None, None
        if gguf is not None:
            self._load(Path(gguf))

    def _load(self, gguf: Path) -> None:
        import openvino_genai as og
        scheduler = og.SchedulerConfig()
        scheduler.cache_size = self.cache_gb  # GB of KV cache blocks
        scheduler.enable_prefix_caching = self.prefix_caching
        props: dict[str, Any] = dict(EXACT) if self.exact else dict(self.properties)
        if self.threads:
            props["INFERENCE_NUM_THREADS"] = self.threads
        try:
            self.pipe = og.ContinuousBatchingPipeline(str(gguf), scheduler, "CPU", props)
        except RuntimeError as exc:
            raise EngineUnavailable(f"OpenVINO GenAI cannot load {gguf}: "
                                    f"{str(exc).splitlines()[0][:200]}") from None
        self.gguf = gguf

    def load_weights(self, state: dict[str, Any], template: str | Path) -> None:
        """Generate from `state` (a transformers Llama state dict, LoRA merged) from now on.
        `template` is a GGUF of the same architecture that gives everything but the tensors."""
        from .gguf_write import write_gguf
        fd, name = tempfile.mkstemp(prefix="perfgym-engine-", suffix=".gguf")
        os.close(fd)
        path = write_gguf(state, template, name)
        old = self._owned
        self.pipe = None  # free the old model before the new one is compiled
        self._load(path)
        self._owned = path
        if old is not None:
            old.unlink(missing_ok=True)

    def close(self) -> None:
        self.pipe = None
        if self._owned is not None:
            self._owned.unlink(missing_ok=True)
            self._owned = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def generate(self, prompt_ids: list[list[int]], n: int, max_tokens: int = 512,
                 temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 min_p: float = 0.0, repetition_penalty: float = 1.0, seed: int | None = None,
                 eos_ids: tuple[int, ...] = (), stop: tuple[str, ...] = (),
                 grammar: str | None = None, ignore_eos: bool = False) -> list[list[Sample]]:
        """`n` samples for each prompt (token ids), all prompts in one batch, in prompt order.
        temperature 0 is greedy. `grammar` (EBNF, xgrammar's dialect) constrains every token;
        `ignore_eos` generates `max_tokens` every time (benchmarks)."""
        if self.pipe is None:
            raise RuntimeError("the engine has no model yet: load_weights first")
        if grammar and n > 1 and temperature > 0:
            # GenAI 2026.4 constrains only the first sequence of a request that asks for
            # several (measured: the others leave the grammar), so each sample is a request
            flat = self.generate([ids for ids in prompt_ids for _ in range(n)], 1, max_tokens,
                                 temperature, top_p, top_k, min_p, repetition_penalty,
                                 None if seed is None else seed * 1009, eos_ids, stop,
                                 grammar, ignore_eos)
            return [[group[0] for group in flat[i * n:(i + 1) * n]]
                    for i in range(len(prompt_ids))]
        import numpy as np
        import openvino as ov
        import openvino_genai as og
        configs = []
        for i in range(len(prompt_ids)):
            cfg = og.GenerationConfig()
            cfg.max_new_tokens = max_tokens
            cfg.apply_chat_template = False  # prompts arrive templated
            if temperature > 0:
                cfg.do_sample = True
                cfg.temperature = temperature
                cfg.top_p = top_p
                if top_k:
                    cfg.top_k = top_k
                if min_p:
                    cfg.min_p = min_p
                cfg.num_return_sequences = n
                if seed is not None:
                    cfg.rng_seed = seed + i
            else:
                cfg.do_sample = False
            if repetition_penalty != 1.0:
                cfg.repetition_penalty = repetition_penalty
            if ignore_eos:
                cfg.ignore_eos = True
            elif eos_ids:
                cfg.stop_token_ids = set(eos_ids)
            if stop:
                cfg.stop_strings = set(stop)
                cfg.include_stop_str_in_output = True
            if grammar:
                cfg.structured_output_config = og.StructuredOutputConfig(grammar=grammar)
            configs.append(cfg)
        handles = [self.pipe.add_request(i, ov.Tensor(np.array([ids], dtype=np.int64)), cfg)
                   for i, (ids, cfg) in enumerate(zip(prompt_ids, configs))]
        stopped = self._run(handles, step_limit(prompt_ids, n, max_tokens))
        results = []
        for i, handle in enumerate(handles):
            outputs = handle.read_all()
            samples = [Sample(list(o.generated_ids), list(o.generated_log_probs),
                              "length" if i in stopped else _finish(o.finish_reason))
                       for o in outputs]
            if temperature <= 0:  # greedy gives one sequence: the same answer n times
                samples = samples[:1] * n
            results.append(samples)
        return results

    def _run(self, handles: list, limit: int) -> set[int]:
        """Steps the pipeline until every request is done, or `limit` steps: then the requests
        still running are stopped where they are, and their indices returned. A step moves
        some request on by a token or a prefill chunk, so a run past the limit is one the
        engine no longer moves; what its requests hold is returned, cut short, rather than a
        wait with no end. (A CI run was killed 70 minutes into a test of grammar-constrained
        sampling; where the engine waited is not known, and a step that never returns is
        beyond this bound.)"""
        import openvino_genai as og
        steps, stopped = 0, set()
        while self.pipe.has_non_finished_requests():
            if steps == limit:
                stopped = {i for i, handle in enumerate(handles)
                           if handle.get_status() == og.GenerationStatus.RUNNING}
                for i in stopped:
                    handles[i].stop()
            elif steps > limit + STOP_STEPS:
                raise RuntimeError(f"OpenVINO GenAI made no progress in {limit} steps and did "
                                   "not stop its requests when asked: restart the process")
            self.pipe.step()
            steps += 1
        if stopped:
            warnings.warn(f"OpenVINO GenAI made no progress in {limit} steps (at most one per "
                          f"token asked for): {len(stopped)} requests were stopped where they "
                          "were", RuntimeWarning, stacklevel=3)
        return stopped


# After the step limit, the steps a stopped request may take to leave the pipeline.
STOP_STEPS = 100


def step_limit(prompt_ids: list[list[int]], n: int, max_tokens: int) -> int:
    """The most steps a generation can need: every prompt token and every token asked for,
    one per step (the least a step does while any request can move), twice over for requests
    the scheduler preempts and computes again, and room for the steps that finish them."""
    return 2 * sum(len(ids) + n * max_tokens for ids in prompt_ids) + 1000


def _finish(reason: Any) -> str:
    text = str(reason).lower()
    return "length" if "length" in text else "stop"
