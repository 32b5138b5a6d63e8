"""GRPO's rollouts on the fast CPU engine (perfgym.engine.openvino), through TRL's `rollout_func`.

TRL hands the step's prompts already repeated G times; the whole step (every group of every
prompt) is generated in one engine call. Before the first rollout of each optimizer step the
trainer's current weights (a LoRA adapter merged in for the moment) are written as a GGUF and
the engine reloads them, so samples always come from the policy being trained. The engine
computes in FP32 from the same weights, so its samples are the trainer's own distribution up to
floating-point order; the per-token log-probabilities it reports are returned to TRL (which in
1.16 applies its importance-sampling correction to vLLM only) and the step's mean gap to the
trainer's own is logged as `engine/logprob_gap` by the caller when asked.
"""
from __future__ import annotations

import time
from typing import Any

from ..engine.openvino import OpenVINOEngine


def merged_state(model: Any) -> dict[str, Any]:
    """The model's weights as a plain transformers state dict: a PEFT model's LoRA merged in
    (then unmerged again, so training goes on from the same parameters)."""
    import torch
    if not hasattr(model, "merge_adapter"):
        return {k: v.detach() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.merge_adapter()
        try:
            state = {}
            for key, value in model.state_dict().items():
                if "lora_" in key:
                    continue
                key = key.removeprefix("base_model.model.").replace(".base_layer.", ".")
                state[key] = value.detach().clone()
        finally:
            model.unmerge_adapter()
    return state


class EngineRollout:
    """TRL rollout_func: the step's groups generated in one call on the engine, from the
    trainer's current weights."""

    def __init__(self, template_gguf: str, G: int, max_new_tokens: int, temperature: float,
                 top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0, seed: int = 0,
                 extra_fields=None, stop: tuple[str, ...] = (), make_engine=None,
                 guides: dict[str, list[int]] | None = None) -> None:
        self.template = template_gguf
        # the engine the samples come from: by default the fast CPU engine; or an
        # OpenAI-compatible server (perfgym.train.server_engine)
        # (the engine starts without a model: sync's load_weights compiles the first one)
        self.make_engine = make_engine or (lambda: OpenVINOEngine(None))
        self.G, self.max_new_tokens = G, max_new_tokens
        self.temperature, self.top_k, self.top_p, self.min_p = temperature, top_k, top_p, min_p
        self.seed = seed
        self.stop = stop  # opened answers end at the entry's closing brace (opening.STOP)
        self.engine: OpenVINOEngine | None = None
        self.synced_step: int | None = None
        self.extra_fields = extra_fields  # (prompt texts) -> dict of per-completion fields
        # prompt text -> a right answer's token ids, put in place of its groups' last sample
        # (GRPOSettings.guides); `guided` counts the groups it went into
        self.guides = guides or {}
        self.guided = 0
        self.seconds = {"sync": 0.0, "generate": 0.0}  # totals, for the step split
        self.calls = 0

    def sync(self, trainer: Any) -> None:
        step = trainer.state.global_step
        if self.engine is not None and self.synced_step == step:
            return
        started = time.monotonic()
        model = trainer.accelerator.unwrap_model(trainer.model)
        state = merged_state(model)
        if self.engine is None:
            self.engine = self.make_engine()
        self.engine.load_weights(state, self.template)
        self.synced_step = step
        self.seconds["sync"] += time.monotonic() - started

    def __call__(self, prompts: list, trainer: Any) -> dict[str, Any]:
        self.sync(trainer)
        tokenizer = trainer.processing_class
        texts = [p if isinstance(p, str) else _chat(tokenizer, p) for p in prompts[::self.G]]
        ids = [tokenizer(t)["input_ids"] for t in texts]
        started = time.monotonic()
        self.calls += 1
        groups = self.engine.generate(
            ids, self.G, max_tokens=self.max_new_tokens, temperature=self.temperature,
            top_p=self.top_p, top_k=self.top_k, min_p=self.min_p,
            seed=self.seed * 100003 + self.calls * 7919,
            eos_ids=(tokenizer.eos_token_id,) if tokenizer.eos_token_id is not None else (),
            stop=self.stop)
        self.seconds["generate"] += time.monotonic() - started
        prompt_ids, completion_ids, logprobs = [], [], []
        for text, group_ids, group in zip(texts, ids, groups):
            samples = [(sample.ids, sample.logprobs) for sample in group]
            if text in self.guides:
                # (TRL takes these log-probabilities for its vLLM correction only: off it,
                # the ratio is the trainer's own, so an answer the engine did not sample fits)
                samples[-1] = (self.guides[text], [0.0] * len(self.guides[text]))
                self.guided += 1
            for sample_ids, sample_logprobs in samples:
                prompt_ids.append(group_ids)
                completion_ids.append(sample_ids)
                logprobs.append(sample_logprobs)
        out = {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}
        if self.extra_fields:
            out.update(self.extra_fields(texts))
        return out


def guide_ids(tokenizer: Any, answer: str) -> list[int]:
    """A guide answer's token ids as a sample of the engine ends: the answer, then the end of
    the turn (the tokenizer's eos, where a sample that ends on its own stops)."""
    ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    return ids + ([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])


def _chat(tokenizer: Any, messages: list) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
