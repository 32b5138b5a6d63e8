"""Backends: one per kernel language, registered by name as Gymnasium registers environments.

A backend owns everything about a language: which code blocks it reads, what the cache key
hashes, the static checks, build, run, verification and timing, and what prompts say. The rest
of perfgym (evaluate, executors, prompts, search, serve, CLI) asks `backend_for(task)` and never
looks at `task.language` itself.

Adding a language is one folder under backends/ with a `BACKEND` object and one line in
REGISTRY (README, "Adding a backend").
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

# language -> the module whose BACKEND serves it (imported on first use: the PyTorch backend's
# module must not make a C-only user import torch)
REGISTRY: dict[str, str] = {
    "c": "perfgym.backends.c",
    "cpp": "perfgym.backends.cpp",
    "torch": "perfgym.backends.torch",
}


class UnknownLanguage(ValueError):
    pass


@dataclass
class Prepared:
    """A candidate that passed everything before its timed run. `state` holds what the
    backend's measure needs (a work directory, an audit)."""

    task: Any
    code: str
    size: dict[str, int]
    config: Any
    machine: dict
    started: float
    techniques: list[str] = field(default_factory=list)
    workdir: Path | None = None
    state: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    backend: Any = None  # the backend that prepared it (a C task's C++ answer: the C++ one)
    # set by evaluate.measure: the baseline its speedup is over (None: not compared), and how
    # many processes to time it in (more than one where the baseline's processes disagreed)
    base: Any = None
    processes: int = 1


# fail(status, message, details="", **outcome_fields) -> Outcome, with the common fields filled
Fail = Callable[..., Any]


class Backend:
    """What every backend provides. Subclasses set the attributes and implement the methods."""

    language: str = ""
    label: str = ""  # what users read: "C/OpenMP"
    fences: tuple[str, ...] = ()  # the code-block tags its extraction reads
    # True: speedups come from timing the task's baseline kernel as a candidate of its own
    # (cached); False: the backend times its reference in the same session.
    separate_baseline: bool = True
    # what search asks first of the task's seed: "improve" a shipped naive kernel, or "generate"
    # from the task's reference
    seed_op: str = "improve"
    # CLI flags that only this backend reads
    own_flags: tuple[str, ...] = ()
    # how its tasks are written: "toml" (a task directory, tasks/spec.py) or "kernelbench"
    task_format: str = "toml"
    # what users call the task's own kernel that speedups are measured against
    baseline_label: str = "naive"

    def baseline_candidate(self, task, config) -> tuple[str, Any]:
        """The task's own baseline as a candidate, and the config to judge it under (what
        `perfgym eval --task T` and `bench-suite` run beside the expert)."""
        return task.baseline.read_text(), config

    def answer_start(self, task, stage: int | None = None) -> str | None:
        """The start of an opened answer (perfgym.opening) for this backend's tasks at
        optimization `stage` (None: no stage rules), or None when the backend does not open
        answers."""
        return None

    def signature_problem(self, signature) -> str | None:
        """Why this backend cannot call an entry of this signature, or None."""
        return None

    def extract(self, task, text: str) -> str:
        """The kernel in a model's answer (or a source file's text); raises ValueError (a
        FormatError) when there is none."""
        raise NotImplementedError

    def key_text(self, task, text: str) -> str:
        """What the cache key hashes for this answer: two answers with the same key text get
        the same verdict."""
        raise NotImplementedError

    def prepare(self, task, text: str, size: dict[str, int], config, machine: dict,
                started: float, fail: Fail) -> Prepared | Any:
        """Everything before the timed run (extract, static checks, build). Returns a Prepared,
        or the Outcome of a candidate that stopped early. May run beside other builds."""
        raise NotImplementedError

    def measure(self, p: Prepared, fail: Fail) -> Any:
        """Run, verify and time a Prepared candidate; called inside the exclusive lane."""
        raise NotImplementedError

    def cleanup(self, p: Prepared) -> None:
        """Free what prepare left for measure (called after measure, or instead of it)."""

    def timeout_field(self) -> str:
        """The EvalConfig field `--timeout` sets."""
        return "timeout"

    def prompt(self, task, op: str, parent_code: str | None = None, feedback: str = "",
               stage=None, machine=None, size=None, override_dir=None, config=None,
               second: tuple[str, str] | None = None) -> str:
        """The prompt for search op `op` ("generate", or "improve"/"deepen"/"repair" of a
        parent's code with its measured feedback, or "crossover" of it with a `second`
        parent's (code, feedback))."""
        raise NotImplementedError

    def describe(self, task) -> list[str]:
        """Lines for `perfgym tasks show` above the prompt."""
        return [f"{task.name} ({self.label})"]


def backend(language: str) -> Backend:
    """The backend registered for `language`."""
    module = REGISTRY.get(language)
    if module is None:
        raise UnknownLanguage(f"no backend for language {language!r}: perfgym has "
                              f"{', '.join(sorted(REGISTRY))}")
    return importlib.import_module(module).BACKEND


def backend_for(task) -> Backend:
    return backend(task.language)


# C++ fences: an answer in one of these, for a task with a C signature, is judged as C++
CPP_FENCES = ("cpp", "c++", "cxx", "cc")


def backend_for_answer(task, text: str) -> Backend:
    """The backend that judges this answer: the task's own, except that a C task's answer
    whose kernel is in a C++ block (```cpp) is built and checked as C++ (a C signature is
    valid C++; the entry is called through the C++ backend's shim, and the baseline stays the
    task's C kernel). The kernel the C backend would extract decides: the last block that
    defines the entry."""
    if task.language != "c" or "```" not in text:
        return backend_for(task)
    from ..extract import defines_entry, fenced_blocks
    defining = [lang.lower() for lang, body, _ in fenced_blocks(text, most=101)
                if defines_entry(body, task.signature)]
    if defining and defining[-1] in CPP_FENCES:
        return backend("cpp")
    return backend_for(task)
