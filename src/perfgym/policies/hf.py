"""A local transformers causal LM, loaded from a path: the same kind of model training uses.

Prompts go through the tokenizer's chat template when it has one. Sampling defaults follow the
seeds (temperature 1.0); completions are decoded without the prompt.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from . import PolicyError


class HFPolicy:
    name = "hf"

    def __init__(self, model_path: str | Path | None = None, model: Any = None,
                 tokenizer: Any = None, device: str | None = None, batch_size: int = 8,
                 **_: Any) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise PolicyError("the hf policy needs torch and transformers: "
                              "pip install 'perfgym[train]'") from None
        if model is None:
            if model_path is None or not Path(model_path).is_dir():
                raise PolicyError(f"model path {model_path} is not a directory with a model")
            tokenizer = AutoTokenizer.from_pretrained(str(model_path))
            model = AutoModelForCausalLM.from_pretrained(str(model_path))
        self.model, self.tokenizer = model, tokenizer
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        self.batch_size = batch_size
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"  # generation continues on the right

    def format(self, prompt: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        return prompt

    def generate(self, prompts: list[str], n: int, **sampling: Any) -> list[list[str]]:
        import torch
        flat = [self.format(p) for p in prompts for _ in range(n)]
        texts: list[str] = []
        temperature = float(sampling.get("temperature", 1.0))
        for start in range(0, len(flat), self.batch_size):
            batch = self.tokenizer(flat[start:start + self.batch_size], return_tensors="pt",
                                   padding=True).to(self.device)
            with torch.no_grad():
                out = self.model.generate(
                    **batch, max_new_tokens=int(sampling.get("max_tokens", 512)),
                    do_sample=temperature > 0, temperature=temperature if temperature > 0 else None,
                    top_p=float(sampling.get("top_p", 1.0)),
                    pad_token_id=self.tokenizer.pad_token_id)
            new = out[:, batch["input_ids"].shape[1]:]
            texts += self.tokenizer.batch_decode(new, skip_special_tokens=True)
        return [texts[i * n:(i + 1) * n] for i in range(len(prompts))]
