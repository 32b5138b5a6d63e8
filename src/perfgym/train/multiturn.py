"""Multi-turn GRPO rollouts on the fast engine: each of a prompt's G rollouts is a trajectory of
up to T turns (kernel, the gym's feedback, a revised kernel, ...), through TRL's `rollout_func`
with its `env_mask` (TRL 1.16: the feedback's tokens are in the sequence the model sees, and
masked out of the loss).

- Turn 1 answers the step's prompt (opened: the model writes the entry's body).
- Each later turn answers a prompt built by perfgym's own repair or improve template (the one
  `--algo refine` sends), carrying the previous turn's **extracted** kernel, never its raw
  answer, and the gym's feedback on it: the status, the first compiler errors, where the answer
  was wrong, GFLOP/s and the fraction of the roofline, profile lines when the config asks.
- Context stays bounded: a trajectory's sequence is its turns' answers and the feedback
  prompts between them, at most T x (max_new_tokens + one prompt); the raw text of earlier
  answers is never repeated in a later prompt (only the kernel extracted from the last one).
- Every turn is judged by the gym and stored in the run store (slot
  `grpo:mt:STEP:TRAJECTORY:TURN`, its parent the turn before); the trajectory's return
  (perfgym.train.turns) is the reward GRPO takes the group advantage of.
- A trajectory ends early once a turn's kernel reaches the task's expert speed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..config import EvalConfig
from ..executors import evaluate_many
from ..extract import FormatError
from ..multisize import evaluate_folded
from ..opening import full_answer
from ..outcome import Outcome
from ..prompts import expand_prompt
from ..rewards import score
from ..tasks import Task
from .engine_rollout import EngineRollout
from .turns import Turn, stop_early, trajectory_return

MARK = "\x00PERFGYM-ANSWER\x00"  # where the assistant's answer sits in a rendered chat


@dataclass(eq=False)  # two trajectories are two, even with the same turns
class Trajectory:
    index: int  # its place in the step's batch (its slot)
    prompt_ids: list[int]
    prompt_text: str  # the first turn's user prompt
    task: Task
    opening: str | None
    context: list[int] = field(default_factory=list)  # what the next turn is generated from
    completion: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)  # 1: the model's token, 0: the gym's
    turns: list[Turn] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    kernel: str | None = None  # the last kernel extracted (shown in the next prompt)
    parent: int | None = None  # the run store id of the last turn
    done: bool = False


def feedback_suffix(tokenizer: Any, first_prompt: str, feedback: str,
                    opening: str | None) -> str:
    """The text between a turn's answer (which ends at the entry's brace) and the next turn's
    answer: the fence's close, the end of the assistant turn, the feedback as a user turn and
    the next answer's opening, in the model's own chat template."""
    messages = [{"role": "user", "content": first_prompt},
                {"role": "assistant", "content": MARK},
                {"role": "user", "content": feedback}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True)
    after = rendered.split(MARK, 1)[1]
    return ("\n```" if opening else "") + after + (opening or "")


class MultiTurnRollout(EngineRollout):
    """TRL rollout_func: G trajectories of up to `turns` turns per prompt, each turn generated
    on the engine from the trainer's current weights and judged by the gym."""

    def __init__(self, template_gguf: str, G: int, max_new_tokens: int, temperature: float,
                 top_k: int, top_p: float, min_p: float, seed: int, stop: tuple[str, ...],
                 turns: int, turn_return: str, gamma: float, scheme: str,
                 prompts: dict[str, tuple[Task, str | None]], user_prompts: dict[str, str],
                 eval_config: EvalConfig,
                 store: Any, machine: dict[str, Any], sizes: list | None = None,
                 stage: int | None = None,
                 executor: Callable[..., list[Outcome]] = evaluate_many,
                 make_engine=None) -> None:
        super().__init__(template_gguf, G, max_new_tokens, temperature, top_k, top_p, min_p,
                         seed=seed, stop=stop, make_engine=make_engine)
        self.turns, self.turn_return, self.gamma = turns, turn_return, gamma
        self.scheme, self.prompts, self.eval_config = scheme, prompts, eval_config
        self.user_prompts = user_prompts  # task name -> its first turn's user prompt
        self.store, self.machine, self.sizes, self.stage = store, machine, sizes, stage
        self.executor = executor  # where the turns are judged: local or a Ray cluster
        self.expert: dict[str, float | None] = {}  # task -> the expert's speedup (stop rule)

    def __call__(self, prompts: list, trainer: Any) -> dict[str, Any]:
        self.sync(trainer)
        tokenizer = trainer.processing_class
        step = trainer.state.global_step
        texts = list(prompts[::self.G])
        trajectories: list[Trajectory] = []
        for text in texts:
            task, opening = self.prompts[text]
            ids = tokenizer(text)["input_ids"]
            first = self.user_prompts[task.name]
            trajectories += [Trajectory(len(trajectories) + g, ids, first, task, opening,
                                        context=list(ids)) for g in range(self.G)]
        eos = (tokenizer.eos_token_id,) if tokenizer.eos_token_id is not None else ()
        for turn in range(self.turns):
            active = [t for t in trajectories if not t.done]
            if not active:
                break
            self.calls += 1
            samples = [group[0] for group in self.engine.generate(
                [t.context for t in active], 1, max_tokens=self.max_new_tokens,
                temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                min_p=self.min_p, seed=self.seed * 100003 + self.calls * 7919, eos_ids=eos,
                stop=self.stop)]
            for t, s in zip(active, samples):
                t.completion += s.ids
                t.logprobs += s.logprobs
                t.mask += [1] * len(s.ids)
                t.context += s.ids
            answers = [full_answer(t.opening, tokenizer.decode(s.ids, skip_special_tokens=True))
                       for t, s in zip(active, samples)]
            outcomes = self._judge(active, answers)
            for t, answer, o in zip(active, answers, outcomes):
                self._record(t, answer, o, step, turn)
                last = turn == self.turns - 1
                if last or stop_early(o.speedup, self._expert_speedup(t.task)):
                    t.done = True
                    continue
                suffix = feedback_suffix(tokenizer, t.prompt_text, self._feedback(t, o),
                                         t.opening)
                env = tokenizer(suffix, add_special_tokens=False)["input_ids"]
                t.completion += env
                t.logprobs += [0.0] * len(env)
                t.mask += [0] * len(env)
                t.context += env
        returns = [trajectory_return(t.turns, self.turn_return, self.gamma)
                   if all(math.isfinite(x.score) for x in t.turns) else math.nan
                   for t in trajectories]
        return {"prompt_ids": [t.prompt_ids for t in trajectories],
                "completion_ids": [t.completion for t in trajectories],
                "logprobs": [t.logprobs for t in trajectories],
                "env_mask": [t.mask for t in trajectories],
                "trajectory_return": returns,
                "turn_statuses": [[x.status for x in t.turns] for t in trajectories],
                "turn_gflops": [[o.gflops if o.ok else None for o in t.outcomes]
                                for t in trajectories]}

    def _judge(self, active: list[Trajectory], answers: list[str]) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(active)
        for name in dict.fromkeys(t.task.name for t in active):
            mine = [i for i, t in enumerate(active) if t.task.name == name]
            task = active[mine[0]].task
            config = self.eval_config.replace(stage=self.stage)
            for i, o in zip(mine, evaluate_folded(task, [(answers[i], config) for i in mine],
                                                  self.sizes, executor=self.executor)):
                outcomes[i] = o
        return outcomes  # type: ignore[return-value]

    def _record(self, t: Trajectory, answer: str, o: Outcome, step: int, turn: int) -> None:
        from ..backends import backend_for
        try:
            kernel = backend_for(t.task).extract(t.task, answer)
        except FormatError:
            kernel = None
        if kernel is not None:
            t.kernel = kernel
        value = score(self.scheme, [o], opened=t.opening is not None)[0]
        t.turns.append(Turn(backend_for(t.task).key_text(t.task, kernel) if kernel else None,
                            o.status.value, value))
        t.outcomes.append(o)
        slot = f"grpo:mt:{step}:{t.index}:{turn}"
        found = self.store.by_slot(slot)  # a resumed step may come back to a slot
        if found is None:
            op = "generate" if turn == 0 else ("improve" if t.outcomes[-2].ok else "repair")
            cid = self.store.add_pending(slot, step, self.stage, t.parent, op, "grpo",
                                         t.prompt_text if turn == 0 else "", answer)
            self.store.complete(cid, o.to_dict(), value if math.isfinite(value) else None)
            t.parent = cid
        else:
            t.parent = found.id

    def _feedback(self, t: Trajectory, o: Outcome) -> str:
        """The next turn's prompt: repair (it failed) or improve (it passed), with the last
        kernel extracted (the task's naive kernel when none was ever extracted) and the gym's
        outcome of this turn."""
        from ..backends import backend_for
        code = t.kernel or backend_for(t.task).baseline_candidate(t.task, self.eval_config)[0]
        return expand_prompt(t.task, "improve" if o.ok else "repair", code, o.to_dict(),
                             self.stage, self.machine, config=self.eval_config)

    def _expert_speedup(self, task: Task) -> float | None:
        if task.name not in self.expert:
            from ..evaluate import evaluate
            if getattr(task, "expert", None) is None:
                self.expert[task.name] = None
            else:
                o = evaluate(task, task.expert.read_text(), None, self.eval_config)
                self.expert[task.name] = o.speedup if o.ok else None
        return self.expert[task.name]
