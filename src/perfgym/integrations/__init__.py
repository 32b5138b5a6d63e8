"""perfgym as the reward of other RL frameworks: verl, OpenRLHF and Prime Intellect's verifiers.

Each framework hands perfgym the same three things: the row a prompt came from (its `Label`:
the task, the size policy, the stage, whether the answer was opened), the model's answer and a
reward scheme. `score_answers` is the one place they become rewards, so an answer earns the
same reward through every framework as through `perfgym eval answer.md --reward R`: the same
EvalConfig (perfgym eval's defaults), so the same cache key and, with the cache on, the same
evaluation; the same scheme over the same group.

    verl.py           verl's custom reward functions (per sample and batched)
    dataset.py        the task set as prompt rows (`perfgym export verl`; OpenRLHF reads them too)
    openrlhf.py       OpenRLHF's remote reward-model protocol (served by `perfgym serve`)
    verifiers_env.py  a verifiers environment, single- and multi-turn
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections import OrderedDict, deque
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from ..config import EvalConfig
from ..executors import Request, evaluate_many
from ..lane import bounded, reward_wait
from ..multisize import aggregate
from ..opening import answer_start, closed, full_answer
from ..outcome import Outcome
from ..rewards import SCHEMES, refused, score
from ..tasks import Task, builtin_names, get_task, parse_size

SIZE_POLICIES = ("default", "train", "heldout", "all", "smallest")


@dataclass(frozen=True)
class Label:
    """What a prompt row tells the reward: which task, at which sizes, under which stage's
    rules, and whether the answer continues the task's opening (`answer_start`)."""

    task: str
    sizes: str = "default"  # a size policy (SIZE_POLICIES) or one size: "256", "N=100000"
    stage: int | None = None
    opened: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, value: Any) -> "Label":
        """A Label from a row: a Label, a dict, its JSON, or a bare task name. Raises
        ValueError with one line for anything else."""
        if isinstance(value, Label):
            return value
        if isinstance(value, str):
            text = value.strip()
            if not text.startswith("{"):
                value = {"task": text}
            else:
                try:
                    value = json.loads(text)
                except (json.JSONDecodeError, RecursionError) as exc:  # nested past the stack
                    why = getattr(exc, "msg", "nested too deeply")
                    raise ValueError(f"label is not JSON ({why}): give a task name or "
                                     "perfgym's label object") from None
        if not isinstance(value, dict):
            raise ValueError(f"label must be a task name or an object, not "
                             f"{type(value).__name__}")
        unknown = set(value) - {"task", "sizes", "stage", "opened"}
        if unknown:
            raise ValueError(f"label has unknown fields: {', '.join(sorted(unknown))} (it takes "
                             "task, sizes, stage, opened)")
        label = cls(task=value.get("task"), sizes=value.get("sizes") or "default",
                    stage=value.get("stage"), opened=value.get("opened", False))
        label.check()
        return label

    def check(self) -> None:
        from ..tasks.torch_task import builtin_gpu_names
        if not isinstance(self.task, str) or self.task not in (builtin_names()
                                                               + builtin_gpu_names()):
            raise ValueError(f"label names no built-in task: {self.task!r} (see perfgym tasks)")
        if self.stage is not None and (type(self.stage) is not int  # not a bool either
                                       or self.stage not in range(1, 7)):
            raise ValueError(f"label stage {self.stage!r} is not a stage 1-6 (or null)")
        if not isinstance(self.opened, bool):
            raise ValueError(f"label opened {self.opened!r} is not true or false")
        if not isinstance(self.sizes, str):
            raise ValueError(f"label sizes {self.sizes!r} is not a size policy or a size")
        self.size_list(get_task(self.task))  # a bad size is refused here, not mid-batch

    def size_list(self, task: Task) -> list[dict[str, int]] | None:
        """None: the task's default size, judged as `perfgym eval` judges it; else the sizes
        whose outcomes are folded into one (a single size is not folded)."""
        if self.sizes == "default":
            return None
        if self.sizes in SIZE_POLICIES:
            return task.sizes(self.sizes)
        return [parse_size(self.sizes, task)]


@dataclass
class Scored:
    """One answer's reward for a trainer, and the Outcome it came from. `refused`: no scheme
    rewards the outcome (a timing disturbed by other programs, a host failure): `reward` is
    then neutral in its group (the mean of the others, 0 alone), as perfgym's own GRPO does,
    while `perfgym eval` prints NaN."""

    reward: float
    outcome: Outcome
    refused: bool


def eval_config(label: Label) -> EvalConfig:
    """perfgym eval's configuration for this label: its defaults and the label's stage."""
    return EvalConfig(stage=label.stage)


def answer_text(task: Task, label: Label, text: str) -> str:
    """The answer the gym judges: an opened answer is put after the task's opening and cut at
    the entry's brace, as `perfgym serve` does for `opened: true`."""
    if not label.opened:
        return text
    opening = answer_start(task, label.stage)
    if opening is None:
        raise ValueError(f"task {label.task!r} has no opening; its label cannot be opened")
    return full_answer(opening, closed(text))


_executors: dict[str, Callable[..., list[Outcome]]] = {}


def executor_for(ray_address: str | None = None) -> Callable[..., list[Outcome]]:
    """Where evaluations run: this machine, or a Ray cluster's benchmark nodes (`ray_address`,
    else $PERFGYM_RAY_ADDRESS; "auto" joins the cluster this process runs in, as a verl
    reward worker does). One executor per address, kept for the process."""
    address = ray_address or os.environ.get("PERFGYM_RAY_ADDRESS") or None
    if address is None:
        return evaluate_many
    if address not in _executors:
        from ..executors.ray_executor import RayExecutor
        _executors[address] = RayExecutor(address).evaluate_many
    return _executors[address]


def check_scheme(reward: str) -> None:
    if reward not in SCHEMES:
        raise ValueError(f"reward scheme {reward!r} is not one of {', '.join(SCHEMES)}")


def score_answers(items: Sequence[tuple[Label, str]], reward: str = "tiered",
                  groups: Sequence[Any] | None = None,
                  executor: Callable[..., list[Outcome]] | None = None,
                  cancel: threading.Event | None = None) -> list[Scored]:
    """Rewards for (label, answer) pairs, in order. All of them are evaluated in one batch
    (builds in parallel, timings one at a time in the exclusive lane); `groups` gives each
    item's group (the answers to one prompt: group_normalized compares within it), by default
    one group for the batch. Each wait for the lane lasts at most PERFGYM_REWARD_WAIT seconds
    (lane.reward_wait), after which the answer is refused with the reason, neutral in its
    group; `cancel` set: what has not started timing stops (lane.Cancelled is raised)."""
    check_scheme(reward)
    run = executor or evaluate_many
    groups = list(groups) if groups is not None else [0] * len(items)
    requests, owner = [], []
    for i, (label, text) in enumerate(items):
        task = get_task(label.task)
        answer = answer_text(task, label, text)
        for size in label.size_list(task) or [None]:
            requests.append(Request(task, answer, size, eval_config(label), tag=i))
            owner.append(i)
    with bounded(reward_wait(), cancel):
        outcomes = run(requests) if requests else []
    parts: dict[int, list[Outcome]] = {}
    for i, o in zip(owner, outcomes):
        parts.setdefault(i, []).append(o)
    folded = [parts[i][0] if len(parts[i]) == 1 else aggregate(parts[i])
              for i in range(len(items))]
    rewards = [0.0] * len(items)
    by_group: dict[tuple, list[int]] = {}
    for i, (label, _) in enumerate(items):  # opened and whole answers never compare
        by_group.setdefault((groups[i], label.opened), []).append(i)
    for (_, opened), members in by_group.items():
        values = score(reward, [folded[i] for i in members], opened=opened)
        for i, r in zip(members, neutral(values)):
            rewards[i] = r
    return [Scored(r, o, refused(o)) for r, o in zip(rewards, folded)]


def neutral(group: list[float]) -> list[float]:
    """A refused reward (NaN) becomes the mean of its group's others, 0 when none: an advantage
    of zero, so the sample teaches nothing (a NaN would poison a trainer's batch). The same
    rule as perfgym's GRPO (train.grpo.neutral_for_refused), kept here free of its imports."""
    known = [r for r in group if math.isfinite(r)]
    fill = sum(known) / len(known) if known else 0.0
    return [r if math.isfinite(r) else fill for r in group]


class RecentRewards:
    """The last rewards each prompt earned in this process. A refused answer scored without its
    group (OpenRLHF sends one rollout per request, verl's reward loop one sample per call)
    gets their mean: the best estimate of its group's mean there is, so its advantage is
    about zero, where a bare 0 would sit between failures and successes under tiered."""

    KEEP = 16  # rewards per prompt
    PROMPTS = 4096  # prompts remembered, the least recently scored dropped first

    def __init__(self) -> None:
        self._by: OrderedDict[str, deque] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(prompt: Any) -> str:
        return hashlib.sha256(repr(prompt).encode()).hexdigest()

    def record(self, prompt: Any, reward: float) -> None:
        key = self._key(prompt)
        with self._lock:
            self._by.setdefault(key, deque(maxlen=self.KEEP)).append(reward)
            self._by.move_to_end(key)
            while len(self._by) > self.PROMPTS:
                self._by.popitem(last=False)

    def neutral(self, prompt: Any) -> float:
        with self._lock:
            seen = self._by.get(self._key(prompt))
            return sum(seen) / len(seen) if seen else 0.0


recent = RecentRewards()


def missing_extra(extra: str, module: str) -> RuntimeError:
    """The one-line error for an integration whose library is not installed."""
    return RuntimeError(f"this needs {module}: pip install 'perfgym[{extra}]' "
                        f"(see docs/integrations/)")
