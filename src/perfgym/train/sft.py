"""SFT with LoRA on slow/fast pairs (KernelCompare): the model learns to produce the fast kernel
given the slow one. TRL's SFTTrainer with a peft LoRA adapter; the defaults are KernelCompare's."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..cpuinfo import use_bf16
from .allocator import return_freed_memory
from .pairs import Pair, read_pairs

SFT_PROMPT = """Here is a {language} kernel ({benchmark}: {description}). Write a faster version \
that computes the same result, with the same function signature.

```{fence}
{slow}
```
"""


@dataclass
class SFTSettings:
    model_path: str | None  # None: the default model
    pairs: str  # JSONL of pairs (the training split), or of {"prompt", "completion"} records
    output_dir: str = "runs/sft"
    lora: bool = True
    lora_r: int = 32
    lora_alpha: int = 64
    lora_dropout: float = 0.1
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                     "up_proj", "down_proj")
    learning_rate: float = 2e-4
    batch_size: int = 4
    max_length: int = 4096
    epochs: float = 8.0
    warmup_steps: int = 100
    max_steps: int = -1  # > 0 overrides epochs
    # autocast: "auto" where the hardware computes bf16 (about 2x faster with AVX512_BF16,
    # measured; emulated on an AVX2 CPU, far slower than FP32: cpuinfo.use_bf16), "on", "off"
    bf16: bool | str = "auto"
    seed: int = 42
    # TRL's SFT default: activations recomputed in the backward, memory for arithmetic
    # (benchmarks/sft_checkpointing_cost.py measures the trade on this machine)
    gradient_checkpointing: bool = True
    low_memory: bool = False  # give freed memory back to the system (train/allocator.py)


def example(pair: Pair) -> dict[str, list[dict[str, str]]]:
    """Prompt-completion form: the slow kernel in, the fast kernel out, as one chat turn each,
    so the chat template wraps them as it wraps every prompt the policies send."""
    fence = {"cuda": "cuda", "cpp": "cpp"}.get(pair.language, "c")
    prompt = SFT_PROMPT.format(language=pair.language.upper() if pair.language == "c" else
                               pair.language, benchmark=pair.benchmark,
                               description=pair.description, fence=fence,
                               slow=pair.slow.strip())
    return {"prompt": [{"role": "user", "content": prompt}],
            "completion": [{"role": "assistant",
                            "content": f"```{fence}\n{pair.fast.strip()}\n```"}]}


def load_examples(path: str | Path) -> list[dict[str, Any]]:
    """Pair records become prompt/completion examples; prompt/completion records are taken as
    they are (any SFT data in that form)."""
    import json
    lines = [ln for ln in Path(path).read_text().splitlines() if ln.strip()]
    if not lines:
        raise ValueError(f"{path} holds no examples")
    first = json.loads(lines[0])
    if "prompt" in first and "completion" in first:
        return [{"prompt": r["prompt"], "completion": r["completion"]}
                for r in map(json.loads, lines)]
    return [example(p) for p in read_pairs(path)]


def plain(record: dict[str, Any]) -> dict[str, str]:
    """A chat record as text, for a tokenizer without a chat template: the prompt the way GRPO
    then sends it to such a model (the user turn and a newline)."""
    def text(turns: Any) -> str:
        return turns if isinstance(turns, str) else turns[-1]["content"]
    return {"prompt": text(record["prompt"]) + "\n", "completion": text(record["completion"])}


def build(settings: SFTSettings, model: Any = None, tokenizer: Any = None):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    rows = load_examples(settings.pairs)
    if model is None:  # an absolute path: the adapter records it as its base model
        from ..models import resolve_model
        settings.model_path = str(resolve_model(settings.model_path))
    tokenizer = tokenizer or AutoTokenizer.from_pretrained(settings.model_path)
    model = model or AutoModelForCausalLM.from_pretrained(settings.model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not getattr(tokenizer, "chat_template", None):
        rows = [plain(r) for r in rows]
    dataset = Dataset.from_list(rows)
    out = Path(settings.output_dir)
    import torch
    import math
    steps = settings.max_steps if settings.max_steps > 0 else math.ceil(
        len(rows) / settings.batch_size) * math.ceil(settings.epochs)
    # KernelCompare's 100 warm-up steps assume thousands of pairs; on a small set they would be the
    # whole run, so warm-up is held to a tenth of the optimizer steps
    warmup = min(settings.warmup_steps, steps // 10)
    config = SFTConfig(
        output_dir=str(out / "checkpoints"), learning_rate=settings.learning_rate,
        per_device_train_batch_size=settings.batch_size, max_length=settings.max_length,
        num_train_epochs=settings.epochs, max_steps=settings.max_steps,
        warmup_steps=warmup, optim="adamw_torch", seed=settings.seed,
        logging_steps=1, save_strategy="no", report_to=[],
        use_cpu=not torch.cuda.is_available(), completion_only_loss=True, bf16=use_bf16(settings.bf16),
        gradient_checkpointing=settings.gradient_checkpointing)
    peft_config = None
    if settings.lora:
        from peft import LoraConfig
        names = {n.split(".")[-1] for n, _ in model.named_modules()}
        targets = [t for t in settings.lora_targets if t in names]
        if not targets:
            raise ValueError(f"none of the LoRA target modules {settings.lora_targets} exist "
                             "in this model")
        peft_config = LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha,
                                 lora_dropout=settings.lora_dropout, target_modules=targets,
                                 task_type="CAUSAL_LM")
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset,
                         processing_class=tokenizer, peft_config=peft_config)
    out.mkdir(parents=True, exist_ok=True)
    (out / "settings.json").write_text(__import__("json").dumps(
        {**asdict(settings), "bf16_used": use_bf16(settings.bf16)}, indent=2))
    return trainer


def train(settings: SFTSettings, model: Any = None, tokenizer: Any = None):
    if settings.low_memory:
        return_freed_memory()
    trainer = build(settings, model, tokenizer)
    trainer.train()
    final = Path(settings.output_dir) / "final"
    trainer.save_model(str(final))
    if settings.lora:  # a merged copy loads like any model (for GRPO or search afterwards)
        merged = trainer.model.merge_and_unload()
        merged.save_pretrained(str(Path(settings.output_dir) / "merged"))
        trainer.processing_class.save_pretrained(str(Path(settings.output_dir) / "merged"))
    return trainer
