"""SFT examples in exactly the form GRPO and search ask: the task's generate prompt as a chat
user turn, a verified kernel in one ```c block as the assistant's answer.

A small model fine-tuned on a different prompt (a plain slow/fast pair) is never asked for what
it learned: GRPO and the hf policy send the chat-templated generate prompt. Here the prompt is
built by the same function they use, and TRL applies the same chat template to both.

Kernels come from the task itself (naive, expert) and from `variants/TASK__*.c`; each is
evaluated first and kept only if it is OK, so the model is never taught a wrong kernel.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config import EvalConfig
from ..executors import Request, evaluate_many
from ..prompts import generate_prompt
from ..tasks import Task

VARIANTS = Path(__file__).parent / "variants"


def candidate_kernels(task: Task) -> dict[str, str]:
    """name -> code: the task's own kernels and the shipped variants for it."""
    kernels: dict[str, str] = {}
    for label, path in (("naive", task.baseline), ("expert", task.expert)):
        if path is not None and Path(path).is_file():
            kernels[label] = Path(path).read_text()
    for path in sorted(VARIANTS.glob(f"{task.name}__*.c")):
        kernels[path.stem.split("__", 1)[1]] = path.read_text()
    return kernels


def answer(code: str) -> str:
    return f"```c\n{code.strip()}\n```"


def build_examples(task: Task, machine: dict | None, config: EvalConfig | None = None,
                   max_chars: int | None = None, stage: int | None = None
                   ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Conversational prompt/completion records for every kernel that verifies, and why each
    other kernel was left out. `max_chars` drops kernels too long for the completion budget."""
    config = config or EvalConfig()
    prompt = generate_prompt(task, stage, machine, config=config)
    kernels = candidate_kernels(task)
    skipped: dict[str, str] = {}
    if max_chars is not None:
        for name in [n for n, code in kernels.items() if len(answer(code)) > max_chars]:
            skipped[name] = f"longer than {max_chars} characters"
            del kernels[name]
    outcomes = evaluate_many([Request(task, answer(code), None, config.replace(stage=stage))
                              for code in kernels.values()])
    records = []
    for (name, code), outcome in zip(kernels.items(), outcomes):
        if not outcome.ok:
            skipped[name] = f"{outcome.status.value}: {outcome.message}"
            continue
        records.append({"prompt": [{"role": "user", "content": prompt}],
                        "completion": [{"role": "assistant", "content": answer(code)}],
                        "kernel": name, "gflops": outcome.gflops})
    return records, skipped


def write_examples(path: str | Path, records: list[dict[str, Any]]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
