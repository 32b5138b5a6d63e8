"""perfgym as a Prime Intellect verifiers environment (verifiers 0.4, `verifiers.v1`).

    import perfgym.integrations.verifiers_env as pg
    env = pg.load_environment(turns=2, tasks="dot,dgemv", reward="tiered")

or, from verifiers' own command line (the taskset id names the package src/perfgym_kernels):

    vf-eval perfgym-kernels -m MODEL --client.base-url URL/v1 \\
        --env.turns 2 --env.taskset.sizes default -n 13 -r 4 --no-push

One task per perfgym task, its prompt the one perfgym's GRPO sends (dataset.rows). With
`turns` 1 the model answers once; with more, each of its answers is judged and the gym's
feedback is the environment's reply: perfgym's repair prompt when the answer failed, its
improve prompt when it passed, each carrying the kernel extracted from the answer and the
outcome (the prompts of perfgym's own multi-turn GRPO). The task's reward scores every turn
through `score_answers`, so one answer earns what `perfgym eval` gives it, and a trajectory
earns its return over its turns (train.turns: best by default).

The model runs under verifiers' `null` harness (a plain chat loop) in a local subprocess
runtime unless the agent's config says otherwise; verifiers prepares that harness with `uv`.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

try:
    import verifiers.v1 as vf
except ImportError:  # the integration's one-line error, raised where it is used
    from . import missing_extra
    raise missing_extra("verifiers", "verifiers 0.4 (verifiers.v1)") from None
from verifiers.v1.runtimes import SubprocessConfig

from ..backends import backend_for
from ..config import EvalConfig
from ..extract import FormatError
from ..prompts import expand_prompt
from ..tasks import get_task
from ..train.turns import RETURNS, Turn, trajectory_return
from . import Label, Scored, check_scheme, executor_for, score_answers

TASKSET_ID = "perfgym-kernels"  # verifiers imports a taskset by its top-level package


class KernelData(vf.TaskData):
    label: str  # perfgym's Label as JSON: the task, sizes, stage


class KernelTaskConfig(vf.TaskConfig):
    reward: str = "tiered"
    """perfgym's reward scheme; a multi-turn return needs a per-answer one (tiered,
    weighted, log_speedup, speed)."""
    turn_return: str = "best"
    """A trajectory's return over its turns' rewards: best, last or discounted."""
    ray_address: str | None = None
    """Judge on this Ray cluster's benchmark nodes (default: this machine)."""


def turns_of(trace: vf.Trace) -> list[str]:
    """The model's answers in order: its sampled assistant messages."""
    return [node.message.content or "" for node in trace.nodes
            if node.sampled and isinstance(node.message, vf.AssistantMessage)]


class KernelTask(vf.Task[KernelData, vf.State, KernelTaskConfig]):
    @vf.reward
    async def perfgym(self, trace: vf.Trace) -> float:
        answers = turns_of(trace)
        turns, scored = await off_loop(score_turns, self, answers or [""])
        # the trace says what each turn was judged, and whether a reward is a refusal's
        # neutral stand-in (a disturbed timing, a lane wait past its bound, a host fault)
        trace.info["perfgym"] = {"status": [s.outcome.status.value for s in scored],
                                 "refused": [s.refused for s in scored],
                                 "reasons": [s.outcome.message if s.refused else ""
                                             for s in scored]}
        trace.metrics["perfgym_refused"] = float(any(s.refused for s in scored))
        trace.metrics["perfgym_ok"] = float(any(s.outcome.ok for s in scored))
        if not answers:
            return turns[0].score
        return trajectory_return(turns, self.config.turn_return)


async def off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args, cancel=event)` in a worker thread, so the event loop (every other rollout's
    model calls) runs while an answer is compiled, checked and timed. Cancelled (verifiers'
    scoring timeout), the event is set: what has not started timing stops, and the thread
    ends soon after rather than judging for nobody."""
    cancel = threading.Event()
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, lambda: fn(*args, cancel=cancel))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        cancel.set()
        raise


def score_turns(task: KernelTask, answers: list[str],
                cancel: threading.Event | None = None) -> tuple[list[Turn], list[Scored]]:
    """Each answer judged alone (a turn's score does not depend on the others), as a Turn,
    and what judged it."""
    label = Label.parse(task.data.label)
    check_scheme(task.config.reward)
    if task.config.turn_return not in RETURNS:
        raise ValueError(f"turn_return {task.config.turn_return!r} is not one of "
                         f"{', '.join(RETURNS)}")
    scored = score_answers([(label, a) for a in answers], task.config.reward,
                           groups=range(len(answers)),
                           executor=executor_for(task.config.ray_address), cancel=cancel)
    return [Turn(kernel_key(label, a), s.outcome.status.value, s.reward)
            for a, s in zip(answers, scored)], scored


def kernel_key(label: Label, answer: str) -> str | None:
    """The answer's kernel as the cache sees it (None when none can be extracted), so a turn
    that repeats an earlier kernel adds nothing to the return."""
    task = get_task(label.task)
    backend = backend_for(task)
    try:
        return backend.key_text(task, backend.extract(task, answer))
    except FormatError:
        return None


class KernelTasksetConfig(vf.TasksetConfig):
    id: str = TASKSET_ID
    tasks: str = ""
    """perfgym tasks, comma-separated (default: every built-in CPU task)."""
    op: str = "improve"
    """improve: the task's naive kernel is shown (perfgym's GRPO prompt); generate: not."""
    sizes: str = "default"
    """A size policy (default, train, heldout, all, smallest) or one size ("N=100000")."""
    stage: int | None = None
    task: KernelTaskConfig = KernelTaskConfig()


class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
    def load(self) -> list[KernelTask]:
        from .dataset import rows
        names = [t.strip() for t in self.config.tasks.split(",") if t.strip()] or None
        return [KernelTask(KernelData(idx=i, id=row["extra_info"]["task"],
                                      name=row["extra_info"]["task"],
                                      prompt=row["prompt"][0]["content"], label=row["label"]),
                           self.config.task)
                for i, row in enumerate(rows(names, self.config.op, self.config.sizes,
                                             self.config.stage))]


class KernelEnvConfig(vf.EnvConfig):
    taskset: KernelTasksetConfig = KernelTasksetConfig()
    agent: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime=SubprocessConfig())
    """The model's seat: verifiers' plain chat harness, run locally."""
    turns: int = 1
    """Answers per episode: 1 is single-turn; each further turn answers the gym's feedback."""


class KernelEnv(vf.Env[KernelEnvConfig]):
    async def run(self, task: KernelTask, agents: vf.Agents) -> None:
        if self.config.turns <= 1:
            await agents.agent.run(task)
            return
        async with agents.agent.interaction(task) as chat:
            segment = await chat.turn()  # the task's prompt opens the exchange
            for _ in range(self.config.turns - 1):
                if segment.terminated:
                    break
                reply = await feedback(task, segment.last_reply)
                segment = await chat.turn(reply)


async def feedback(task: KernelTask, answer: str) -> str:
    """The environment's reply to one answer (judge_and_reply), judged off the event loop."""
    return await off_loop(judge_and_reply, task, answer)


def judge_and_reply(task: KernelTask, answer: str, cancel: threading.Event | None = None
                    ) -> str:
    """The environment's reply to one answer: perfgym's repair prompt (it failed) or improve
    prompt (it passed), with the kernel extracted from it (the task's naive kernel when none
    could be) and the gym's outcome, as perfgym's multi-turn GRPO asks its next turn. The
    evaluation is cached, so the reward judges this answer again for free."""
    label = Label.parse(task.data.label)
    t = get_task(label.task)
    outcome = score_answers([(label, answer)], task.config.reward,
                            executor=executor_for(task.config.ray_address),
                            cancel=cancel)[0].outcome
    config = EvalConfig(stage=label.stage)
    backend = backend_for(t)
    try:
        code = backend.extract(t, answer)
    except FormatError:
        code = backend.baseline_candidate(t, config)[0]
    from ..machine import machine_info
    return expand_prompt(t, "improve" if outcome.ok else "repair", code, outcome.to_dict(),
                         label.stage, machine_info(), config=config)


def load_environment(turns: int = 1, tasks: str = "", reward: str = "tiered",
                     sizes: str = "default", op: str = "improve", stage: int | None = None,
                     turn_return: str = "best", ray_address: str | None = None,
                     **env: Any) -> vf.Env:
    """The perfgym environment: single-turn (`turns` 1) or multi-turn. `env`: further
    EnvConfig fields, e.g. agent={"harness": {"id": "null"}, "runtime": {"type": "prime"}}."""
    check_scheme(reward)
    if turns < 1:
        raise ValueError(f"turns must be at least 1, not {turns}")
    taskset = KernelTasksetConfig(tasks=tasks, op=op, sizes=sizes, stage=stage,
                                  task=KernelTaskConfig(reward=reward, turn_return=turn_return,
                                                        ray_address=ray_address))
    return vf.load_environment(KernelEnvConfig(taskset=taskset, turns=turns, **env))


__all__ = ["KernelEnv", "KernelTaskset", "load_environment"]
