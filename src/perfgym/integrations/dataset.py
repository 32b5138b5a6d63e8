"""The task set as prompt rows in verl's RL data format, written as Parquet by `perfgym export
verl`. OpenRLHF reads the same file (`--data.prompt_dataset FILE --data.input_key prompt
--data.label_key label --data.apply_chat_template`).

One row per task:
    data_source   "perfgym/<task>" (verl groups its metrics by it)
    prompt        the chat: one user message, the prompt perfgym's own GRPO sends
    ability       "hpc"
    reward_model  {"style": "rule", "ground_truth": <the Label as JSON>}: what the reward reads
    extra_info    {"index", "task", "sizes", "stage", "op", "opening", "opened"} for the
                  rollout and the logs (opening: the task's answer_start, "" when none)
    label         the Label as JSON again, as a plain column for OpenRLHF's --data.label_key
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..backends import backend_for
from ..config import EvalConfig
from ..opening import answer_start
from ..prompts import expand_prompt, generate_prompt
from ..tasks import Task, builtin_names, get_task
from . import Label

OPS = ("generate", "improve")


def task_prompt(task: Task, op: str, stage: int | None, machine: dict[str, Any] | None,
                config: EvalConfig) -> str:
    """The user prompt of perfgym's fixed-mode GRPO (train.grpo.task_prompt, whose imports
    need the train extra; tests/integrations/test_verl.py checks the two agree): "generate" from
    the task alone, or "improve" its naive kernel, as a search asks first."""
    if op == "improve":
        backend = backend_for(task)
        seed = backend.baseline_candidate(task, config)[0]
        shown = {"status": "OK", "message": f"the task's {backend.baseline_label} kernel"}
        return expand_prompt(task, "improve", seed, shown, stage, machine, config=config)
    return generate_prompt(task, stage, machine, config=config)


def rows(tasks: list[str] | None = None, op: str = "improve", sizes: str = "default",
         stage: int | None = None, opened: bool = False,
         machine: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One verl row per task (every built-in CPU task by default). `machine`: the facts the
    prompt states (this machine's by default: export where the benchmark runs)."""
    if op not in OPS:
        raise ValueError(f"--op {op!r} is not one of {', '.join(OPS)}")
    if machine is None:
        from ..machine import machine_info
        machine = machine_info()
    out = []
    for index, name in enumerate(tasks or builtin_names()):
        label = Label(task=name, sizes=sizes, stage=stage, opened=opened)
        label.check()
        task = get_task(name)
        config = EvalConfig(stage=stage)
        opening = answer_start(task, stage) or ""
        if opened and not opening:
            raise ValueError(f"task {name!r} has no opening: export it without --opened")
        text = label.to_json()
        out.append({
            "data_source": f"perfgym/{name}",
            "prompt": [{"role": "user", "content": task_prompt(task, op, stage, machine,
                                                               config)}],
            "ability": "hpc",
            "reward_model": {"style": "rule", "ground_truth": text},
            # stage -1: none (a Parquet column of nulls alone has no type)
            "extra_info": {"index": index, "task": name, "sizes": sizes,
                           "stage": -1 if stage is None else stage, "op": op,
                           "opening": opening, "opened": opened},
            "label": text,
        })
    return out


def write_parquet(records: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise RuntimeError("writing Parquet needs pyarrow: pip install 'perfgym[verl]'") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records), path)
