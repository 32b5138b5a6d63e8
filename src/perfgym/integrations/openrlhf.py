"""OpenRLHF's remote reward-model protocol, served by `perfgym serve` at POST /openrlhf.

OpenRLHF (0.11: `openrlhf.utils.agent.SingleTurnAgentExecutor`, `--reward.remote_url`) POSTs

    {"query": [prompt + response, ...], "prompts": [prompt, ...], "labels": [label, ...]}

where each query is the rollout decoded with its special tokens and each label the dataset's
`--label_key` column, and reads `rewards` (`scores` when given, for filtering) and
`extra_logs` from the answer, lists in the order of the queries, as its own `serve_rm` answers:

    {"rewards": [...], "scores": [...], "extra_logs": {"perfgym_ok": [...], ...}}

It sends no headers of its own, so the token rides in the URL as HTTP basic auth
(`http://perfgym:TOKEN@host:8000/openrlhf`, which aiohttp turns into an Authorization header)
and the reward scheme as a query parameter (`?reward=log_speedup`).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from ..errors import HostError
from ..tasks import TaskError
from . import Label, recent, score_answers

MAX_TEXT_CHARS = 400_000  # a query is the prompt (a few KB) and the answer
MIN_PROMPT_TAIL = 16  # characters of a cut prompt that must remain to find where the answer starts

# extra_logs["perfgym_reason"]: why a rollout's reward is neutral (OpenRLHF turns every
# extra_logs value into a tensor, so the reason is a number there and text in "reasons")
JUDGED, REFUSED, BAD_LABEL, NO_PROMPT, TASK_FAULT = 0, 1, 2, 3, 4
log = logging.getLogger("perfgym.openrlhf")


class OpenRLHFRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: list[str] = Field(min_length=1, description="each rollout: prompt + response, as "
                             "decoded with its special tokens")
    prompts: list[str] = Field(description="each rollout's prompt, as sent to the model")
    labels: list[Any] = Field(description="each row's --label_key value: perfgym's label "
                              "(JSON, as `perfgym export verl` writes it) or a task name")


class OpenRLHFResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]
    reasons: list[str] = Field(description="why each rollout's reward is what it is (empty: "
                               "judged); OpenRLHF does not read it, perfgym's log has it too")


def answer_of(query: str, prompt: str) -> tuple[str, bool]:
    """The model's response and whether its prompt had been cut. OpenRLHF decodes prompt and
    response together, so the query starts with the prompt; a prompt too long for its
    max_len is cut from the left (its token ids), so the query then starts with the prompt's
    tail, after a broken character or two at the cut. Anything else raises ValueError rather
    than guess (the prompt itself holds a kernel that could be taken for the answer)."""
    if query.startswith(prompt):
        return query[len(prompt):], False
    body = query.lstrip("\ufffd")  # a multi-byte character cut in two decodes as U+FFFD
    tail = prompt[-MIN_PROMPT_TAIL:]
    if len(prompt) >= MIN_PROMPT_TAIL:
        at = body.find(tail)
        while at >= 0:  # the first place where what precedes is the prompt's own end
            end = at + len(tail)
            if prompt.endswith(body[:end]):
                return body[end:], True
            at = body.find(tail, at + 1)
    raise ValueError("the query does not start with its prompt, nor with the prompt's end "
                     "(OpenRLHF sends prompt + response)")


@dataclass
class Rollout:
    """One rollout as the route reads it: what to judge, or why it cannot be."""

    label: Label | None
    answer: str
    truncated: bool = False
    code: int = JUDGED
    reason: str = ""


def read_rollout(query: str, prompt: str, label: Any, known: set[str]) -> Rollout:
    try:
        parsed = Label.parse(label)
        if parsed.task not in known:
            raise ValueError(f"unknown task {parsed.task!r}")
    except (ValueError, TaskError) as exc:
        return Rollout(None, "", code=BAD_LABEL, reason=f"bad label: {exc}")
    try:
        answer, truncated = answer_of(query, prompt)
    except ValueError as exc:
        return Rollout(parsed, "", code=NO_PROMPT, reason=str(exc))
    return Rollout(parsed, answer, truncated,
                   reason="the prompt was cut from the left by OpenRLHF (raise --max_len); "
                   "the answer after it was judged" if truncated else "")


def score_rollouts(body: "OpenRLHFRequest", reward: str, known: set[str],
                   cancel: threading.Event | None = None,
                   executor: Callable | None = None) -> OpenRLHFResponse:
    """A reward for every rollout, always a number: a rollout that cannot be judged (a bad or
    empty label, a query without its prompt, a task fault, a refused timing, a host that
    failed) is neutral with its reason. The rollouts of one prompt form a group; neutral is
    the mean of the group's judged rewards, else of the last ones this prompt earned
    (OpenRLHF sends one rollout per request), else 0."""
    rows = [read_rollout(q, p, l, known)
            for q, p, l in zip(body.query, body.prompts, body.labels)]
    judged = [i for i, r in enumerate(rows) if r.code == JUDGED]
    rewards: list[float | None] = [None] * len(rows)
    try:
        scored = score_answers([(rows[i].label, rows[i].answer) for i in judged], reward,
                               groups=[body.prompts[i] for i in judged], executor=executor,
                               cancel=cancel) if judged else []
    except (TaskError, HostError) as exc:  # the task at that size, or this host: not the answer
        code = TASK_FAULT if isinstance(exc, TaskError) else REFUSED
        for i in judged:
            rows[i].code, rows[i].reason = code, f"not judged: {exc}"
        scored = []
    ok = [0.0] * len(rows)
    gflops = [0.0] * len(rows)
    for i, s in zip(judged, scored):
        ok[i], gflops[i] = float(s.outcome.ok), float(s.outcome.gflops or 0.0)
        if s.refused:
            rows[i].code = REFUSED
            rows[i].reason = f"refused ({s.outcome.status.value}): {refusal(s.outcome)}"
        else:
            rewards[i] = s.reward
            recent.record(body.prompts[i], s.reward)
    for i, r in enumerate(rows):
        if rewards[i] is None:
            same = [rewards[j] for j in range(len(rows))
                    if body.prompts[j] == body.prompts[i] and rewards[j] is not None]
            rewards[i] = sum(same) / len(same) if same else recent.neutral(body.prompts[i])
        if r.reason:
            log.warning("rollout %d: %s", i, r.reason)
    return OpenRLHFResponse(rewards=rewards, scores=rewards, reasons=[r.reason for r in rows],
                            extra_logs={
                                "perfgym_ok": ok, "perfgym_gflops": gflops,
                                "perfgym_refused": [float(r.code != JUDGED) for r in rows],
                                "perfgym_reason": [float(r.code) for r in rows],
                                "perfgym_truncated": [float(r.truncated) for r in rows]})


def refusal(outcome) -> str:
    """Why an outcome earns no reward, in one line."""
    if outcome.copied_from is not None:
        return f"a copy of a kernel the memory showed ({outcome.copied_from})"
    if outcome.disturbed is not None:
        return f"its timing was disturbed by other programs: {outcome.disturbed}"
    return outcome.message.splitlines()[0] if outcome.message else "no verdict"


def check(body: OpenRLHFRequest) -> None:
    if not len(body.query) == len(body.prompts) == len(body.labels):
        raise ValueError(f"query, prompts and labels differ in length ({len(body.query)}, "
                         f"{len(body.prompts)}, {len(body.labels)}): one of each per rollout")
    if any(len(t) > MAX_TEXT_CHARS for t in body.query + body.prompts):
        raise ValueError(f"a query or prompt is over {MAX_TEXT_CHARS} characters")
