"""A local model on the fast CPU engine (perfgym.engine.openvino): the default model's policy
when OpenVINO GenAI is installed (the `local` extra).

The model is what the hf policy takes (a model or adapter directory, a .gguf, a model name, or
nothing: the default model). A GGUF file or a named model (the coder) runs as shipped, its
tokenizer and chat template read from the file. The default model and model directories (weights
training made) are written once as an F16 GGUF beside perfgym's models, keyed by where they came
from, so that engine and trainer hold the same weights. Prompts go through the tokenizer's chat
template as in the hf policy, so both policies see the same text.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from .errors import PolicyError


def engine_gguf(model_dir: Path, model: Any = None) -> Path:
    """The F16 GGUF of `model_dir`'s weights (written on first use, then reused)."""
    from ..engine.gguf_write import GGUFWriteError, write_gguf
    from ..models import models_dir, shipped_gguf
    stamp = hashlib.sha256(str(model_dir.resolve()).encode())
    for f in sorted(model_dir.glob("*.safetensors")):
        stamp.update(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}".encode())
    target = models_dir() / "engine" / f"{model_dir.name}-{stamp.hexdigest()[:12]}.gguf"
    if target.is_file():
        return target
    if model is None:
        from .hf import load_model
        model, _ = load_model(model_dir)
    try:
        return write_gguf(model.state_dict(), shipped_gguf(), target)
    except GGUFWriteError as exc:
        raise PolicyError(f"the fast engine serves models of the default model's architecture "
                          f"({exc}); use --policy hf for this one") from None


def gguf_tokenizer(gguf: Path) -> Any:
    """The tokenizer and chat template a GGUF carries, read by transformers once and then kept
    beside perfgym's models (reading it from a 1.1 GB file takes a while)."""
    from transformers import AutoTokenizer

    from ..models import models_dir
    stat = gguf.stat()
    saved = models_dir() / "tokenizers" / f"{gguf.stem}-{stat.st_size}-{stat.st_mtime_ns}"
    if (saved / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(str(saved))
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    partial = saved.with_name(saved.name + ".partial")
    tokenizer.save_pretrained(str(partial))
    import os
    import shutil
    try:
        os.replace(partial, saved)
    except OSError:  # another process saved it first
        shutil.rmtree(partial, ignore_errors=True)
    return tokenizer


def _measured_settings(gguf: Path) -> dict[str, Any]:
    """engine.probe's choice for this machine, measured at its first use, with a message."""
    import sys

    from ..engine import vllm_engine
    from ..engine.probe import SAMPLES, TOKENS, engine_settings, measure_tok_s
    ids: list[int] = []

    def measure(path: Path, props: dict[str, Any], beat: float | None = None) -> float:
        ids[:] = ids or search_prompt_ids(path)
        if props.get("engine") == "vllm":
            return vllm_engine.measure_tok_s(path, vllm_engine.vllm_python(), ids, SAMPLES,
                                             TOKENS, beat)
        return measure_tok_s(path, props, ids)
    return engine_settings(gguf, measure,
                           say=lambda line: print(line, file=sys.stderr, flush=True))


def search_prompt_ids(gguf: Path) -> list[int]:
    """perfgym's dgemm improve prompt (what a search sends), as the GGUF's tokenizer reads
    it after its chat template: the engine probe's prompt."""
    from ..prompts import expand_prompt
    from ..tasks import get_task
    tokenizer = gguf_tokenizer(gguf)
    task = get_task("dgemm")
    prompt = expand_prompt(task, "improve", task.baseline.read_text(), None)
    return tokenizer(tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], tokenize=False,
        add_generation_prompt=True))["input_ids"]


def _vllm_engine(gguf: Path) -> Any:
    """vLLM's CPU build on `gguf`'s int8 copy, loaded with a message (engine/vllm_engine.py)."""
    import sys

    from ..engine.vllm_engine import VLLMEngine, int8_checkpoint, vllm_python

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)
    checkpoint = int8_checkpoint(gguf, say)
    say("starting vLLM's CPU build on the int8 coder (measured faster here than OpenVINO)")
    return VLLMEngine(checkpoint, vllm_python())


class OpenVINOPolicy:
    name = "openvino"
    # answers generated in one call, stored before the next starts (search.Engine): the
    # engine decodes a batch's sequences together, several times faster per token than one
    # at a time on a 2-core CPU, and a kill loses at most one batch
    batch_size = 32

    def __init__(self, model_path: str | Path | None = None, cache_gb: int = 1,
                 exact: bool | None = None, prefix_caching: bool | None = None,
                 seed: int = 0, **_: Any) -> None:
        # cache_gb: the engine's KV cache; a batch of many long samples needs more than 1 GB,
        # or the scheduler preempts and recomputes sequences (208 x 512 tokens at 1 GB: not
        # done after 17 min)
        from ..engine.openvino import EngineUnavailable, OpenVINOEngine, available
        if not available():
            raise PolicyError("the openvino policy needs OpenVINO GenAI: "
                              "pip install 'perfgym[local]'")
        from transformers import AutoTokenizer

        from ..models import ModelUnavailable, resolve_model, shipped_engine_gguf
        try:
            shipped = shipped_engine_gguf(model_path)
            path = None if shipped else resolve_model(model_path)
        except ModelUnavailable as exc:
            raise PolicyError(str(exc)) from None
        # advanced per call: two calls never repeat each other's samples; a run's --seed
        # starts its calls far from another seed's (a run makes far fewer than 10^6 calls)
        self.seed = seed * 1_000_000
        if shipped is not None:  # as shipped: the engine's own precisions unless asked
            from ..engine.search_settings import SHIPPED_ENGINE
            self.tokenizer = gguf_tokenizer(shipped)
            exact = SHIPPED_ENGINE["exact"] if exact is None else exact

            def openvino(properties: dict[str, Any] | None) -> OpenVINOEngine:
                return OpenVINOEngine(
                    shipped, cache_gb=max(cache_gb, SHIPPED_ENGINE["cache_gb"]), exact=exact,
                    prefix_caching=(SHIPPED_ENGINE["prefix_caching"] if prefix_caching is None
                                    else prefix_caching), properties=properties)
            try:
                # not exact: the settings measured fastest on this machine (engine.probe)
                self.engine_choice = None if exact else _measured_settings(shipped)
                if self.engine_choice and self.engine_choice["properties"].get("engine"):
                    # another engine measured faster; OpenVINO's best setting stands behind it
                    from ..engine.probe import CANDIDATES, openvino_choice
                    behind = CANDIDATES[openvino_choice(self.engine_choice["rows"])]
                    self._fallback = lambda: openvino(behind)
                    try:
                        self.engine = _vllm_engine(shipped)
                        self.name = "vllm"
                    except EngineUnavailable as exc:
                        self._fall_back(exc)
                    return
                self.engine = openvino(self.engine_choice and self.engine_choice["properties"])
            except EngineUnavailable as exc:
                raise PolicyError(str(exc)) from None
            return
        model = None
        if (path / "adapter_config.json").is_file():  # merged once, as the hf policy does
            from .hf import load_model
            model, self.tokenizer = load_model(path)
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        try:
            self.engine = OpenVINOEngine(engine_gguf(path, model), cache_gb=cache_gb,
                                         prefix_caching=bool(prefix_caching))
        except EngineUnavailable as exc:
            raise PolicyError(str(exc)) from None

    _fallback: Any = None  # where vLLM runs: OpenVINO, made if vLLM fails
    engine_choice: dict[str, Any] | None = None

    @property
    def tokens_per_second(self) -> float | None:
        """The engine's rate for a batch of samples as the probe measured it on this machine
        (the engine running now: OpenVINO's setting after a fallback), None where unmeasured."""
        if not self.engine_choice:
            return None
        name = self.engine_choice["name"]
        if self.name == "openvino" and self.engine_choice["properties"].get("engine"):
            from ..engine.probe import openvino_choice
            name = openvino_choice(self.engine_choice["rows"])
        return next((r["tok_s"] for r in self.engine_choice["rows"] if r["name"] == name),
                    None) or None

    def _fall_back(self, why: Exception) -> None:
        """vLLM failed (it did not start, its worker died or stuck): the search goes on with
        OpenVINO GenAI, saying so once. Answers record the engine that wrote them."""
        import sys
        print(f"vLLM failed ({str(why)[:300]}); the search goes on with OpenVINO GenAI",
              file=sys.stderr, flush=True)
        old = getattr(self, "engine", None)
        if old is not None:
            old.close()
        self.engine, self._fallback = self._fallback(), None
        self.name = "openvino"

    def format(self, prompt: str, opening: str | None = None) -> str:
        from .hf import chat_text
        return chat_text(self.tokenizer, prompt, opening)

    def generate(self, prompts: list[str], n: int, openings: list[str | None] | None = None,
                 **sampling: Any) -> list[list[str]]:
        """n completions per prompt: what the model wrote after each prompt's opening. The
        sampling key `grammar` (True) constrains an opened answer's body (opening.GRAMMAR)."""
        from ..opening import GRAMMAR, STOP, closed
        openings = openings or [None] * len(prompts)
        ids = [self.tokenizer(self.format(p, o))["input_ids"]  # as the hf policy tokenizes
               for p, o in zip(prompts, openings)]
        opened = any(openings)
        self.seed += 1
        asked = dict(
            max_tokens=int(sampling.get("max_tokens", 512)),
            temperature=float(sampling.get("temperature", 1.0)),
            top_p=float(sampling.get("top_p") or 1.0), top_k=int(sampling.get("top_k") or 0),
            min_p=float(sampling.get("min_p") or 0.0),
            repetition_penalty=float(sampling.get("repetition_penalty") or 1.0),
            seed=self.seed * 7919, eos_ids=tuple(self._eos()), stop=STOP if opened else (),
            grammar=GRAMMAR if opened and sampling.get("grammar") else None)
        from ..engine.openvino import EngineUnavailable
        try:
            results = self.engine.generate(ids, n, **asked)
        except EngineUnavailable as exc:
            if self._fallback is None:
                raise PolicyError(str(exc)) from None
            self._fall_back(exc)
            results = self.engine.generate(ids, n, **asked)
        texts = [[self.tokenizer.decode(s.ids, skip_special_tokens=True) for s in group]
                 for group in results]
        return [[closed(t) if o else t for t in group] for group, o in zip(texts, openings)]

    def _eos(self) -> list[int]:
        eos = self.tokenizer.eos_token_id
        return [eos] if eos is not None else []
