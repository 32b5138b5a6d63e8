"""GRPO's rollouts generated on an OpenAI-compatible server (`perfgym train grpo --engine
server --server-url URL`), single- or multi-turn.

Online RL samples from the policy being trained, so the server must hold the trainer's current
weights. No OpenAI-compatible API takes new weights, but a server that loads whichever model a
request names (`transformers serve` when no model is pinned) can be handed them by path: before
the first rollout of each optimizer step the trainer's weights (a LoRA adapter merged in) are
written as a transformers checkpoint under the run's directory, and every request of that step
names it. The step before's checkpoint is removed; the server drops it from memory after its
idle timeout (transformers serve: `--model-timeout`).

A context is token ids (a multi-turn context holds the gym's feedback between the turns), so it
is sent as text to the legacy completions endpoint and the reply is tokenized back. Each
request carries its own seed: the G trajectories of a prompt start from the same context, and
a server that seeds every request alike would answer them alike.

The server reports no per-token log-probabilities (transformers serve ignores `logprobs`); each
token's is None, which TRL reads as unknown. TRL needs them only for vLLM's importance
sampling, and the samples are on-policy: they come from the step's own weights.

vLLM serves one model and takes new weights through TRL's own server mode (`--vllm server`,
single-turn), not through this engine.
"""
from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

from ..engine.openvino import Sample
from ..opening import STOP, closed


class ServerEngine:
    """The engine interface of perfgym.engine.openvino (load_weights, generate, close) on an
    OpenAI-compatible server that loads a model by path."""

    def __init__(self, base_url: str, directory: Path, model_config: Any, tokenizer: Any,
                 concurrency: int = 8, timeout: float = 600.0) -> None:
        from ..policies.openai_compat import OpenAIPolicy
        self.directory = Path(directory).resolve()
        self.model_config, self.tokenizer = model_config, tokenizer
        self.policy = OpenAIPolicy(model="(no weights yet)", base_url=base_url,
                                   concurrency=concurrency, timeout=timeout)
        self.loads = 0
        self.checkpoint: Path | None = None

    def load_weights(self, state: dict[str, Any], _template: Any = None) -> None:
        """Generate from `state` (a transformers state dict, LoRA merged) from now on."""
        self.loads += 1
        path = self.directory / f"weights-{self.loads}"
        write_checkpoint(state, self.model_config, self.tokenizer, path)
        old, self.checkpoint = self.checkpoint, path
        self.policy.model = str(path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def generate(self, contexts: list[list[int]], n: int, max_tokens: int,
                 temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 min_p: float = 0.0, seed: int | None = None, eos_ids: tuple[int, ...] = (),
                 stop: tuple[str, ...] = ()) -> list[list[Sample]]:
        """n samples per context, as perfgym.engine.openvino's generate."""
        if self.checkpoint is None:
            raise RuntimeError("the server engine has no weights yet: load_weights first")
        if stop and tuple(stop) != STOP:
            raise ValueError(f"the server engine stops at the entry's closing brace only, "
                             f"not at {stop!r}")
        texts = [self.tokenizer.decode(ids, skip_special_tokens=False) for ids in contexts]
        seeds = [None if seed is None else seed * 1009 + i for i in range(len(texts) * n)]
        sampling = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p,
                    "top_k": top_k, "min_p": min_p, "stop": list(stop) or None}
        replies = self.policy.complete([t for t in texts for _ in range(n)], seeds, **sampling)
        samples = []
        for text, why in replies:
            if stop and why != "refused":
                # the stop string back in (a server cuts it), or the text past it cut off
                text = closed(text, why == "stop")
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][:max_tokens]
            samples.append(Sample(ids, [None] * len(ids), "length" if why == "length"
                                  else "stop"))
        return [samples[i * n:(i + 1) * n] for i in range(len(texts))]

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
        self.checkpoint = None


def write_checkpoint(state: dict[str, Any], model_config: Any, tokenizer: Any,
                     path: Path) -> None:
    """`state` as a transformers checkpoint directory a server can load by path."""
    from safetensors.torch import save_file
    path.mkdir(parents=True, exist_ok=True)
    # every tensor its own memory (safetensors refuses shared ones: tied embeddings)
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in state.items()}
    if getattr(model_config, "tie_word_embeddings", False):
        tensors.pop("lm_head.weight", None)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    # the trainer turns the KV cache off for gradient checkpointing; a server generating
    # without it recomputes the whole context for every token (a 36-token answer: 4x slower)
    config = copy.deepcopy(model_config)
    config.use_cache = True
    config.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
