"""OpenRLHF's own remote reward-model client against `perfgym serve`'s /openrlhf route.

The rows are `perfgym export verl`'s Parquet read by OpenRLHF's PromptDataset (with the
default model's chat template), and each rollout goes through OpenRLHF's
SingleTurnAgentExecutor, which tokenizes the prompt, asks its vLLM engine for a response,
decodes prompt and response together and POSTs them to the reward URL. The vLLM engine (a
GPU) is the one stand-in: it answers with the tokens of a fixed answer. The rewards must be
the ones `perfgym eval answer.md --reward R` gives the same answers.
"""
import asyncio
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("openrlhf", reason="the openrlhf extra is not installed: pip install "
                    "'perfgym[openrlhf]' && pip install --no-deps openrlhf==0.11.2")
pytest.importorskip("fastapi", reason="perfgym serve needs the serve extra")
pytest.importorskip("transformers", reason="the tokenizer needs the local extra")

from answers import ANSWERS, LABEL, SIZE, TASK, eval_reward  # noqa: E402
from service import running_service  # noqa: E402

TOKEN = "integration-secret"
NAMES = ["four_accumulators", "wrong_answer", "compile_error"]


class AnsweringEngine:
    """Stands in for OpenRLHF's vLLM engine: its one response is a fixed answer's tokens and
    the end-of-turn token, as a chat model ends its answer."""

    def __init__(self, tokenizer, text: str) -> None:
        self.ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        self.ids.append(tokenizer.eos_token_id)

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        out = SimpleNamespace(token_ids=list(self.ids), finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """OpenRLHF's PromptDataset over the exported Parquet: (chat-templated prompt, label)."""
    from datasets import load_dataset
    from openrlhf.datasets import PromptDataset
    from transformers import AutoTokenizer

    from perfgym.models import resolve_model
    path = tmp_path_factory.mktemp("openrlhf") / "train.parquet"
    subprocess.run([sys.executable, "-m", "perfgym.cli", "export", "verl", "--task", TASK,
                    "--sizes", SIZE, "-o", str(path)], check=True, timeout=300)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(quiet=True))
    # OpenRLHF's training strategy (DeepSpeed) is only read for these arguments here
    args = SimpleNamespace(data=SimpleNamespace(input_key="prompt", label_key="label",
                                                apply_chat_template=True))
    strategy = SimpleNamespace(args=args, is_rank_0=lambda: True)
    dataset = PromptDataset(load_dataset("parquet", data_files=str(path))["train"], tokenizer,
                            strategy)
    return tokenizer, dataset


@pytest.fixture(scope="module")
def server():
    with running_service(token=TOKEN) as (_, url, _client):
        yield url


def rollout(url: str, tokenizer, prompt: str, label: str, answer: str) -> dict:
    from openrlhf.utils.agent import SingleTurnAgentExecutor
    executor = SingleTurnAgentExecutor(url)
    params = SimpleNamespace(max_tokens=1024, logprobs=None)
    return asyncio.run(executor.execute(prompt, label, params, 8192, tokenizer,
                                        AnsweringEngine(tokenizer, answer)))


def test_openrlhf_client_gets_perfgym_eval_rewards(rows, server, tmp_path):
    tokenizer, dataset = rows
    _, prompt, label, _ = dataset[0]
    assert json.loads(label) == {**json.loads(LABEL), "stage": None, "opened": False}
    url = server.replace("http://", f"http://perfgym:{TOKEN}@") + "/openrlhf?reward=tiered"
    for name in NAMES:
        expected = eval_reward(name, tmp_path)
        out = rollout(url, tokenizer, prompt, label, ANSWERS[name])
        # OpenRLHF keeps the answer's list (one per query) as its reward
        assert out["reward"] == [expected], name
        assert out["extra_logs"]["perfgym_ok"] == [float(name == "four_accumulators")]


def test_wrong_token_gets_no_reward(rows, server):
    tokenizer, dataset = rows
    _, prompt, label, _ = dataset[0]
    url = server.replace("http://", "http://perfgym:wrong@") + "/openrlhf"
    # the client logs the 401 and leaves the reward empty: no reward for an unauthorized call
    assert rollout(url, tokenizer, prompt, label, ANSWERS["naive"])["reward"] is None


@pytest.mark.parametrize("body,status,fragment", [
    ({"query": ["p x"], "prompts": ["p "], "labels": ['{"task": "nope"}']}, 400, "no built-in"),
    ({"query": ["p x"], "prompts": ["q "], "labels": ["dot"]}, 400, "does not start"),
    ({"query": ["p x", "p y"], "prompts": ["p "], "labels": ["dot"]}, 400, "differ in length"),
    ({"query": ["p x"], "prompts": ["p "], "labels": ['{"task": "dot", "x": 1}']}, 400,
     "unknown fields"),
    ({"query": ["p x"], "prompts": ["p "], "labels": ['{"task": "dot", "sizes": "0"}']}, 400,
     "rollout 0"),
    ({"query": ["p x"], "prompts": ["p "], "labels": [{"task": "dot", "stage": True}]}, 400,
     "stage"),
    ({"query": ["p x"], "prompts": ["p "], "labels": [{"task": "dot", "opened": "no"}]}, 400,
     "opened"),
    ({"query": ["p x"], "prompts": ["p "], "labels": [[1, 2]]}, 400, "task name or an object"),
    ({"query": [], "prompts": [], "labels": []}, 422, ""),
    ({"query": ["p x"] * 65, "prompts": ["p "] * 65, "labels": ["dot"] * 65}, 422, "limit"),
])
def test_bad_requests_are_refused_with_the_reason(server, body, status, fragment):
    import httpx
    r = httpx.post(server + "/openrlhf", json=body, timeout=60,
                   headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == status, r.text
    assert fragment in r.text


def test_the_route_takes_the_bearer_token_and_refuses_none(server):
    import httpx
    body = {"query": ["p " + ANSWERS["no_code"]], "prompts": ["p "], "labels": ["dot"]}
    assert httpx.post(server + "/openrlhf", json=body, timeout=60).status_code == 401
    r = httpx.post(server + "/openrlhf?reward=weighted", json=body, timeout=60,
                   headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    assert r.json()["rewards"] == [0.0]  # a format error earns nothing under weighted
    bad = httpx.post(server + "/openrlhf?reward=nope", json=body, timeout=60,
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert bad.status_code == 422
