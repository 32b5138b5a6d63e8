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

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_TEXT_CHARS = 400_000  # a query is the prompt (a few KB) and the answer


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


def answer_of(query: str, prompt: str) -> str:
    """The model's response: the query after its prompt. OpenRLHF decodes prompt and response
    together, so the prompt must be where the query starts; anything else is refused rather
    than guessed (the prompt itself holds a kernel that could be taken for the answer)."""
    if not query.startswith(prompt):
        raise ValueError("the query does not start with its prompt (OpenRLHF sends prompt + "
                         "response)")
    return query[len(prompt):]


def check(body: OpenRLHFRequest) -> None:
    if not len(body.query) == len(body.prompts) == len(body.labels):
        raise ValueError(f"query, prompts and labels differ in length ({len(body.query)}, "
                         f"{len(body.prompts)}, {len(body.labels)}): one of each per rollout")
    if any(len(t) > MAX_TEXT_CHARS for t in body.query + body.prompts):
        raise ValueError(f"a query or prompt is over {MAX_TEXT_CHARS} characters")
