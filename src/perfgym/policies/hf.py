"""A local transformers causal LM: the same kind of model training uses.

The model is a directory, a LoRA adapter directory (its base model is loaded under it), a
`.gguf` file, or nothing: the default model (perfgym.models). Prompts go through the
tokenizer's chat template when it has one. Completions are decoded without the prompt.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import PolicyError

SAMPLING_KEYS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "max_tokens")


class CompletionRepetitionPenalty:
    """A repetition penalty over the generated tokens only. transformers' own also penalizes
    every token of the prompt, and a code prompt shares its vocabulary (`double`, `for`, `[`)
    with the code it asks for."""

    def __init__(self, penalty: float, prompt_length: int) -> None:
        self.penalty, self.prompt_length = penalty, prompt_length

    def __call__(self, input_ids, scores):
        import torch
        generated = input_ids[:, self.prompt_length:]
        if generated.shape[1] == 0:
            return scores
        picked = torch.gather(scores, 1, generated)
        picked = torch.where(picked < 0, picked * self.penalty, picked / self.penalty)
        return scores.scatter(1, generated, picked)


def chat_text(tokenizer: Any, prompt: str, opening: str | None = None) -> str:
    """The prompt as the model sees it: through the tokenizer's chat template when it has one
    (shared by every local policy, search and training, so they all see the same text). An
    `opening` (perfgym.opening) is the start of the assistant's answer, continued by the
    model (transformers' continue_final_message)."""
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}]
        if opening:
            return tokenizer.apply_chat_template(
                messages + [{"role": "assistant", "content": opening}], tokenize=False,
                continue_final_message=True)
        return tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True)
    return prompt + "\n" + (opening or "")


def load_model(model_path: str | Path | None) -> tuple[Any, Any]:
    """(model, tokenizer) for a model directory, an adapter directory, a .gguf or None."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..models import ModelUnavailable, resolve_model
    try:
        path = resolve_model(model_path)
    except ModelUnavailable as exc:
        raise PolicyError(str(exc)) from None
    adapter = path / "adapter_config.json"
    if adapter.is_file():
        base = json.loads(adapter.read_text()).get("base_model_name_or_path") or ""
        if not Path(base).is_dir():
            raise PolicyError(f"the adapter in {path} names its base model {base!r}, which is "
                              "not a directory here: pass the merged model or retrain")
        from peft import PeftModel
        tokenizer = AutoTokenizer.from_pretrained(base)
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(path))
        return model.merge_and_unload(), tokenizer
    return AutoModelForCausalLM.from_pretrained(str(path)), AutoTokenizer.from_pretrained(str(path))


class HFPolicy:
    name = "hf"

    def __init__(self, model_path: str | Path | None = None, model: Any = None,
                 tokenizer: Any = None, device: str | None = None, batch_size: int = 8,
                 seed: int | None = None, **_: Any) -> None:
        try:
            import torch
            import transformers  # noqa: F401
        except ImportError:
            raise PolicyError("the hf policy needs torch and transformers: "
                              "pip install 'perfgym[local]'") from None
        if seed is not None:  # generate() samples from torch's global generator
            torch.manual_seed(seed)
        if model is None:
            model, tokenizer = load_model(model_path)
        self.model, self.tokenizer = model, tokenizer
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        self.model.eval()
        self.batch_size = batch_size
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"  # generation continues on the right

    def format(self, prompt: str, opening: str | None = None) -> str:
        return chat_text(self.tokenizer, prompt, opening)

    def generate(self, prompts: list[str], n: int, openings: list[str | None] | None = None,
                 **sampling: Any) -> list[list[str]]:
        """n completions per prompt: what the model wrote after each prompt's opening."""
        import torch
        from transformers import LogitsProcessorList

        from ..opening import STOP, closed
        openings = openings or [None] * len(prompts)
        flat = [self.format(p, o) for p, o in zip(prompts, openings) for _ in range(n)]
        texts: list[str] = []
        temperature = float(sampling.get("temperature", 1.0))
        options: dict[str, Any] = {"do_sample": temperature > 0}
        if temperature > 0:
            options.update(temperature=temperature, top_p=float(sampling.get("top_p") or 1.0),
                           top_k=int(sampling.get("top_k") or 0),  # 0: off
                           min_p=float(sampling.get("min_p") or 0.0) or None)
        if any(openings):  # the body ends at the entry's closing brace
            options.update(stop_strings=list(STOP), tokenizer=self.tokenizer)
        penalty = float(sampling.get("repetition_penalty") or 1.0)
        for start in range(0, len(flat), self.batch_size):
            batch = self.tokenizer(flat[start:start + self.batch_size], return_tensors="pt",
                                   padding=True).to(self.device)
            prompt_length = batch["input_ids"].shape[1]
            processors = LogitsProcessorList(
                [CompletionRepetitionPenalty(penalty, prompt_length)] if penalty != 1.0 else [])
            with torch.no_grad():
                out = self.model.generate(
                    **batch, max_new_tokens=int(sampling.get("max_tokens", 512)),
                    logits_processor=processors, pad_token_id=self.tokenizer.pad_token_id,
                    **options)
            new = out[:, prompt_length:]
            texts += self.tokenizer.batch_decode(new, skip_special_tokens=True)
        texts = [closed(t) if o else t for t, o in zip(texts, (o for o in openings
                                                                for _ in range(n)))]
        return [texts[i * n:(i + 1) * n] for i in range(len(prompts))]
