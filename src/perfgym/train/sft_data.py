"""SFT examples in exactly the form GRPO and search ask.

`build_examples`: the task's generate prompt as a chat user turn, a verified kernel in one
```c block as the assistant's answer. `opened_examples`: the improve prompt (what a search
sends first), and an opened answer: perfgym's opening and a faster kernel's body.

A small model fine-tuned on a different prompt (a plain slow/fast pair) is never asked for what
it learned: GRPO and the policies send the chat-templated prompt built here by the same
functions they use, and TRL applies the same chat template to both.

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


def opened_body(task: Task, code: str) -> str | None:
    """What a model would write after `task`'s opening for this kernel: the entry's body from
    its opening brace through its closing one; None when the kernel does not have that shape
    (the entry not written as the opening writes it, or a "}" at a line's start inside it,
    where an opened answer's generation stops)."""
    from ..opening import STOP, answer_start
    opening = answer_start(task)
    if opening is None:
        return None
    head = opening.rstrip()[:-1].rstrip().splitlines()[-1]  # the entry's signature
    at = code.find(head)
    if at < 0:
        return None
    rest = code[at + len(head):].lstrip()
    if not rest.startswith("{"):
        return None
    body = rest[1:].rstrip()
    end = body.find(STOP[0])
    if end < 0 or end + len(STOP[0]) != len(body):
        return None
    return body


def opened_examples(tasks: list[Task], machine: dict | None, config: EvalConfig,
                    op: str = "improve", min_speedup: float = 1.1,
                    max_body_chars: int | None = None
                    ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """SFT records in the opened form GRPO and search use: the task's prompt (`op`, built by
    the function GRPO uses) as the user turn, perfgym's opening and a faster kernel's body as
    the assistant's answer. A kernel is kept when the joined answer (the opening + its body,
    exactly what the model would be judged on) is OK and at least `min_speedup` times the
    naive kernel: the model is taught neither a wrong kernel nor a copy of the one it is shown.
    Returns the records and, per task:kernel, why each other kernel was left out."""
    from ..opening import answer_start
    from .grpo import task_prompt
    records: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    todo: list[tuple[Task, str, str]] = []
    for task in tasks:
        opening = answer_start(task)
        for name, code in candidate_kernels(task).items():
            if name == "naive":
                continue
            body = opened_body(task, code)
            if body is None:
                skipped[f"{task.name}:{name}"] = "not the shape of an opened answer"
            elif max_body_chars is not None and len(body) > max_body_chars:
                skipped[f"{task.name}:{name}"] = f"body longer than {max_body_chars} characters"
            else:
                todo.append((task, name, opening + body))
    outcomes = evaluate_many([Request(t, a, None, config) for t, _, a in todo])
    for (task, name, joined), outcome in zip(todo, outcomes):
        if not outcome.ok or (outcome.speedup or 0.0) < min_speedup:
            why = outcome.message.splitlines()[0][:160] if outcome.message else ""
            skipped[f"{task.name}:{name}"] = (f"{outcome.status.value}, speedup "
                                              f"{outcome.speedup or 0:.2f}: {why}")
            continue
        prompt = task_prompt(task, op, None, machine, config)
        records.append({"prompt": [{"role": "user", "content": prompt}],
                        "completion": [{"role": "assistant", "content": joined + "\n```"}],
                        "task": task.name, "kernel": name, "speedup": outcome.speedup})
    return records, skipped
