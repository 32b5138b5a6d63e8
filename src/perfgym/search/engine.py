"""What every search shares: turn planned steps into stored, evaluated, rewarded candidates.

A step is one child to produce: its slot, iteration, stage, parent and op. `run_steps` asks the
policy only for steps whose slot is not in the store yet, stores the completions as pending,
evaluates everything pending through the executor, and rewards each group of siblings (same
parent and op: the group GRPO compares). Running it again on the same steps changes nothing.
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..config import EvalConfig
from ..executors import evaluate_many
from ..multisize import evaluate_folded
from ..backends import backend_for
from ..outcome import Outcome
from ..policies import Policy
from ..opening import answer_start, full_answer
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
    op: str  # generate | improve | deepen | repair | crossover | transform
    other: Candidate | None = None  # crossover: the second parent
    transform: str | None = None  # transform: which one (prompts/transforms/NAME.txt)
    max_tokens: int | None = None  # the answer's limit in place of the sampler's (a climb's)
    temperature: float | None = None  # the sampler's own unless set (a climb's reheat)

    @property
    def group(self) -> tuple:
        return (self.iteration, self.parent.id if self.parent else None, self.op, self.stage,
                self.transform)


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
    # judge every candidate on these sizes (folded: the worst status, geometric-mean rates);
    # None: the task's default size
    sizes: list[dict[str, int]] | None = None
    memory: Any = None  # a memory.KernelMemory: verified kernels of other tasks for prompts
    memory_k: int = 3  # how many of them a prompt shows
    # perfgym opens each answer (fence, includes, the entry's signature) and the model writes
    # the body (perfgym.opening): the policy gets the opening, the store the joined answer
    answer_start: bool = False
    # time each group's correct children against each other and the baseline in interleaved
    # rounds (perfgym.group_timing) before rewarding them; the local executor, default size
    group_timing: bool = False
    # stop after this many candidates besides the seed, whatever the algorithm plans: the
    # budget of an equal-candidates comparison (SQD's count per iteration depends on what
    # passed, so no choice of its flags alone hits a number exactly); None: no cap
    max_candidates: int | None = None
    # time.monotonic() past which no new step runs, whatever the algorithm plans: the budget of
    # an equal-time comparison for algorithms without one of their own (refine, best-of-n,
    # evolve); the round running then ends first. None: no deadline
    deadline: float | None = None

    def __post_init__(self) -> None:
        # a resumed run continues the policy where the stored candidates left it
        if hasattr(self.policy, "restore") and \
                (state := self.store.value(self._state_key)) is not None:
            self.policy.restore(state)

    @property
    def _state_key(self) -> str:
        return f"policy_state:{self.policy.name}"

    def prompt(self, step: Step) -> str:
        if step.op == "generate":
            return expand_prompt(self.task, "generate", None, None, step.stage, self.machine,
                                 override_dir=self.templates, config=self.eval_config)
        second = (parent_code(self.task, step.other), step.other.outcome) if step.other else None
        return expand_prompt(self.task, step.op, parent_code(self.task, step.parent),
                             step.parent.outcome if step.parent else None, step.stage,
                             self.machine, override_dir=self.templates, config=self.eval_config,
                             second=second, transform=step.transform)

    def prompt_with_memory(self, step: Step) -> str:
        """The step's prompt, with the memory's kernels most like the task and the parent
        (never the task's own: see memory.store) when the search has a memory."""
        from ..prompts import MEMORY_OPS, add_memory
        prompt = self.prompt(step)
        if self.memory is None or step.op not in MEMORY_OPS:
            return prompt
        kernels = self.memory.for_prompt(self.task, parent_code(self.task, step.parent),
                                         self.memory_k)
        return add_memory(prompt, self.task, kernels, self.templates)

    def _flag_copy(self, outcome: Outcome, completion: str) -> None:
        """Mark a passing kernel that is a memory kernel up to names and whitespace: it is
        not the model's own result (rewards.refused, RunStore.best leave it out)."""
        if self.memory is None or not outcome.ok:
            return
        try:
            code = backend_for(self.task).extract(self.task, completion)
        except ValueError:
            return
        if source := self.memory.copy_of(self.task, code):
            outcome.copied_from = source
            outcome.message = f"a copy of {source}, not counted; {outcome.message}"

    def run_steps(self, steps: list[Step]) -> list[Candidate]:
        steps = self.within_budget(steps)
        self._generate_missing(steps)
        self._evaluate_pending(steps)
        self._reward_groups(steps)
        return [self.store.by_slot(s.slot) for s in steps]

    def within_budget(self, steps: list[Step]) -> list[Step]:
        """The steps the candidate cap and the deadline leave, in plan order (the seed is never
        cut). The steps already in the store count once, so a resumed run keeps the same
        steps."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            steps = [s for s in steps if s.op == "seed" or self.store.by_slot(s.slot)]
        if self.max_candidates is None:
            return steps
        planned = {s.slot for s in steps}
        spent = sum(1 for c in self.store.candidates()
                    if c.op != "seed" and c.slot not in planned)
        left = max(0, self.max_candidates - spent)
        kept = []
        for s in steps:
            if s.op == "seed":
                kept.append(s)
            elif left > 0:
                kept.append(s)
                left -= 1
        return kept

    def _generate_missing(self, steps: list[Step]) -> None:
        missing = [s for s in steps if self.store.by_slot(s.slot) is None]
        by_prompt: dict[str, list[Step]] = defaultdict(list)
        for s in missing:
            by_prompt[self.prompt_with_memory(s)].append(s)
        # the policy takes one n and one sampler per call
        by_call: dict[tuple, list[str]] = defaultdict(list)
        for prompt, group in by_prompt.items():
            by_call[len(group), group[0].max_tokens, group[0].temperature].append(prompt)
        for (n, max_tokens, temperature), all_prompts in by_call.items():
            sampling = self.sampling
            if max_tokens is not None:
                sampling = {**sampling, "max_tokens": max_tokens}
            if temperature is not None:
                sampling = {**sampling, "temperature": temperature}
            # a local model generates in batches: each batch is stored before the next starts,
            # so a kill loses at most one (a server policy gets every prompt at once)
            batch = getattr(self.policy, "batch_size", 0)
            per_call = max(1, batch // n) if batch else len(all_prompts)
            for start in range(0, len(all_prompts), per_call):
                self._generate(all_prompts[start:start + per_call], n, by_prompt, sampling)

    def _generate(self, prompts: list[str], n: int, by_prompt: dict[str, list[Step]],
                  sampling: dict[str, Any]) -> None:
        # a prompt's steps share its stage (the prompt states the stage's rules)
        openings = [answer_start(self.task, by_prompt[p][0].stage) if self.answer_start
                    else None for p in prompts]
        if any(openings):
            completions = [[full_answer(opening, t) for t in texts] for opening, texts in
                           zip(openings, self.policy.generate(prompts, n, openings=openings,
                                                              **sampling))]
        else:
            completions = self.policy.generate(prompts, n, **sampling)
        # the completions and the policy's state after them are stored together: a kill
        # between the two would hand the stored completions out again on resume
        with self.store.transaction():
            for prompt, texts in zip(prompts, completions):
                for step, text in zip(by_prompt[prompt], texts):
                    self.store.add_pending(step.slot, step.iteration, step.stage,
                                           step.parent.id if step.parent else None, step.op,
                                           self.policy.name, prompt, text)
            if hasattr(self.policy, "state"):
                self.store.set_value(self._state_key, self.policy.state())

    def _evaluate_pending(self, steps: list[Step]) -> None:
        pending = [c for c in (self.store.by_slot(s.slot) for s in steps) if c.pending]
        if not pending:
            return
        def record(i: int, outcome: Outcome) -> None:
            # stored the moment it is known: a kill loses at most the evaluations in flight
            self._flag_copy(outcome, pending[i].completion)
            self.store.complete(pending[i].id, outcome.to_dict(), float("nan"))
            if self.on_result:
                self.on_result(self.store.get(pending[i].id))

        evaluate_folded(self.task, [(c.completion, self.eval_config.replace(stage=c.stage))
                                    for c in pending], self.sizes, record, self.executor)

    def _times_groups(self) -> bool:
        # (a group's rounds are timed here: a cluster's benchmark nodes time one at a time)
        return self.group_timing and self.sizes is None and self.executor is evaluate_many

    def _reward_groups(self, steps: list[Step]) -> None:
        groups: dict[tuple, list[Candidate]] = defaultdict(list)
        for s in steps:
            groups[s.group].append(self.store.by_slot(s.slot))
        for members in groups.values():
            outcomes = [Outcome.from_dict(c.outcome) for c in members]
            if self._times_groups() and not any("group_timed" in o.flags for o in outcomes):
                from ..group_timing import retime_group
                stage = members[0].stage
                outcomes = retime_group(self.task, [c.completion for c in members], outcomes,
                                        self.eval_config.replace(stage=stage))
                for c, o in zip(members, outcomes):
                    self.store.complete(c.id, o.to_dict(), float("nan"))
            for c, r in zip(members, score(self.reward, outcomes, opened=self.answer_start)):
                self.store.set_reward(c.id, r)
