"""Where memory kernels come from: a run directory's candidates (their stored Outcomes), the
tasks' expert kernels and a pair dataset's fast kernels (both evaluated here, for real).

Each source gives (items, refused): items are (task, code, outcome, source) for
KernelMemory.add_all, which admits only the verified ones; refused counts what could not even
be put to it, by reason.
"""
from __future__ import annotations

from collections import Counter
from math import prod
from pathlib import Path
from typing import Any

from ..backends import backend_for
from ..config import EvalConfig
from ..executors import Request, evaluate_many
from ..store import RunStore, StoreError
from ..tasks import builtin_names, get_task

Item = tuple[Any, str | None, dict[str, Any] | None, str]


def extract(task, text: str) -> str | None:
    """The kernel in a model's answer (or a source file), None when there is none."""
    try:
        return backend_for(task).extract(task, text)
    except ValueError:
        return None


def from_run(run_dir: str | Path, task=None) -> tuple[list[Item], Counter]:
    """Every evaluated candidate of a run with its stored Outcome (add_all refuses the failed
    ones). The seed is the task's naive baseline, no model's kernel: left out. `task`: the
    run's task when its stored name is not a built-in one (a task directory)."""
    if not RunStore.exists(run_dir):
        raise StoreError(f"{run_dir} holds no run (no {RunStore.FILE}): give a run directory "
                         "from `perfgym search`")
    store = RunStore(run_dir)
    try:
        name = (store.config() or {}).get("task")
        if task is None:
            if not name:
                raise StoreError(f"{run_dir} names no task in its config: pass --task")
            task = get_task(name)
        elif name and name != task.name:
            raise StoreError(f"{run_dir} is a run of {name}, not of --task {task.name}")
        items = [(task, extract(task, c.completion), c.outcome, f"run:{run_dir}#{c.id}")
                 for c in store.candidates() if c.op != "seed"]
    finally:
        store.close()
    return items, Counter()


def small_size(task) -> dict[str, int]:
    """The task's smallest train size (by element count): a quick, honest measurement."""
    return min(task.sizes("train") or task.sizes("default"), key=lambda s: prod(s.values()))


def _evaluated(pending: list[tuple[Any, str, dict | None, str]], config: EvalConfig
               ) -> list[Item]:
    outcomes = evaluate_many([Request(task, code, size, config) for task, code, size, _ in
                              pending])
    return [(task, code, o.to_dict(), source)
            for (task, code, _, source), o in zip(pending, outcomes)]


def from_experts(names: list[str] | None = None, small: bool = False,
                 config: EvalConfig | None = None) -> tuple[list[Item], Counter]:
    """The expert kernels of the named tasks (default: every built-in one), each evaluated at
    its task's default size (or smallest train size)."""
    pending, refused = [], Counter()
    for name in names or builtin_names():
        task = get_task(name)
        if getattr(task, "expert", None) is None:
            refused["the task has no expert kernel"] += 1
            continue
        pending.append((task, task.expert.read_text(), small_size(task) if small else None,
                        f"expert:{task.name}"))
    return _evaluated(pending, config or EvalConfig()), refused


def from_pairs(path: str | Path, small: bool = False,
               config: EvalConfig | None = None) -> tuple[list[Item], Counter]:
    """The fast kernel of each pair that names a task, evaluated on it; a pair without a task
    (a CUDA pair, say) cannot be verified here and is refused."""
    from ..train.pairs import read_pairs
    pending, refused = [], Counter()
    for number, pair in enumerate(read_pairs(path), start=1):
        if not pair.task:
            refused["a pair without a task cannot be verified"] += 1
            continue
        task = get_task(pair.task)
        pending.append((task, pair.fast, small_size(task) if small else None,
                        f"pairs:{path}#{number}"))
    return _evaluated(pending, config or EvalConfig()), refused
