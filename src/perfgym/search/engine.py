"""What every search shares: turn planned steps into stored, evaluated, rewarded candidates.

A step is one child to produce: its slot, iteration, stage, parent and op. `run_steps` asks the
policy only for steps whose slot is not in the store yet, stores the completions as pending,
evaluates everything pending through the executor, and rewards each group of siblings (same
parent and op: the group GRPO compares). Running it again on the same steps changes nothing.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import EvalConfig
from ..executors import Request, evaluate_many
from ..backends import backend_for
from ..outcome import Outcome
from ..policies import Policy
from ..prompts import expand_prompt
from ..rewards import score
from ..store import Candidate, RunStore
from ..tasks import Task


@dataclass(frozen=True)
class Step:
    slot: str
    iteration: int
    stage: int | None  # the child's stage (its rules are enforced); None: no stage rules
    parent: Candidate | None  # None: generate from the task alone
    op: str  # generate | improve | deepen | repair

    @property
    def group(self) -> tuple:
        return (self.iteration, self.parent.id if self.parent else None, self.op, self.stage)


# How much of a parent's code a prompt may carry: a small model's context is 8k tokens, and a
# raw answer can be any length (fences nested, a draft before the final version).
PARENT_CODE_CHARS = 6000


def parent_code(task: Task, parent: Candidate | None) -> str | None:
    """The code a prompt shows for a parent: the kernel the gym extracted from its answer,
    capped; never the raw answer (its prose and fences would nest inside the new prompt)."""
    if parent is None:
        return None
    try:
        code = backend_for(task).extract(task, parent.completion)
    except ValueError:  # no usable code block (every FormatError is one): what it wrote
        code = parent.completion.replace("```", "")
    if len(code) > PARENT_CODE_CHARS:
        code = code[:PARENT_CODE_CHARS] + "\n/* ... cut: the rest of the parent's code */"
    return code


@dataclass
class Engine:
    store: RunStore
    policy: Policy
    task: Task
    eval_config: EvalConfig = field(default_factory=EvalConfig)
    reward: str = "tiered"
    sampling: dict[str, Any] = field(default_factory=dict)
    machine: dict[str, Any] | None = None
    on_result: Callable[[Candidate], None] | None = None
    templates: Path | None = None  # a directory of prompt templates overriding ours
    executor: Callable[..., list[Outcome]] = evaluate_many  # local by default; or a cluster

    def prompt(self, step: Step) -> str:
        if step.op == "generate":
            return expand_prompt(self.task, "generate", None, None, step.stage, self.machine,
                                 override_dir=self.templates, config=self.eval_config)
        return expand_prompt(self.task, step.op, parent_code(self.task, step.parent),
                             step.parent.outcome if step.parent else None, step.stage,
                             self.machine, override_dir=self.templates, config=self.eval_config)

    def run_steps(self, steps: list[Step]) -> list[Candidate]:
        self._generate_missing(steps)
        self._evaluate_pending(steps)
        self._reward_groups(steps)
        return [self.store.by_slot(s.slot) for s in steps]

    def _generate_missing(self, steps: list[Step]) -> None:
        missing = [s for s in steps if self.store.by_slot(s.slot) is None]
        by_prompt: dict[str, list[Step]] = defaultdict(list)
        for s in missing:
            by_prompt[self.prompt(s)].append(s)
        by_count: dict[int, list[str]] = defaultdict(list)  # the policy takes one n per call
        for prompt, group in by_prompt.items():
            by_count[len(group)].append(prompt)
        for n, all_prompts in by_count.items():
            # a local model generates in batches: each batch is stored before the next starts,
            # so a kill loses at most one (a server policy gets every prompt at once)
            per_call = max(1, getattr(self.policy, "batch_size", 0) // n) or len(all_prompts)
            for start in range(0, len(all_prompts), per_call):
                self._generate(all_prompts[start:start + per_call], n, by_prompt)

    def _generate(self, prompts: list[str], n: int, by_prompt: dict[str, list[Step]]) -> None:
        completions = self.policy.generate(prompts, n, **self.sampling)
        for prompt, texts in zip(prompts, completions):
            for step, text in zip(by_prompt[prompt], texts):
                self.store.add_pending(step.slot, step.iteration, step.stage,
                                       step.parent.id if step.parent else None, step.op,
                                       self.policy.name, prompt, text)

    def _evaluate_pending(self, steps: list[Step]) -> None:
        pending = [c for c in (self.store.by_slot(s.slot) for s in steps) if c.pending]
        if not pending:
            return
        requests = [Request(self.task, c.completion, None,
                            self.eval_config.replace(stage=c.stage), tag=c.id) for c in pending]

        def record(i: int, outcome: Outcome) -> None:
            # stored the moment it is known: a kill loses at most the evaluations in flight
            self.store.complete(pending[i].id, outcome.to_dict(), float("nan"))
            if self.on_result:
                self.on_result(self.store.get(pending[i].id))

        self.executor(requests, on_result=record)

    def _reward_groups(self, steps: list[Step]) -> None:
        groups: dict[tuple, list[Candidate]] = defaultdict(list)
        for s in steps:
            groups[s.group].append(self.store.by_slot(s.slot))
        for members in groups.values():
            outcomes = [Outcome.from_dict(c.outcome) for c in members]
            for c, r in zip(members, score(self.reward, outcomes)):
                self.store.set_reward(c.id, r)
