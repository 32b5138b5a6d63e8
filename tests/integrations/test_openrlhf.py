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
pytest.importorskip("fastapi", reason="perfgym serve needs the serve extra: pip install 'perfgym[serve]'")
pytest.importorskip("transformers", reason="the tokenizer needs the local extra: pip install 'perfgym[local]'")

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
    ({"query": ["p x", "p y"], "prompts": ["p "], "labels": ["dot"]}, 400, "differ in length"),
    ({"query": [], "prompts": [], "labels": []}, 422, ""),
    ({"query": ["p x"] * 65, "prompts": ["p "] * 65, "labels": ["dot"] * 65}, 422, "limit"),
])
def test_malformed_requests_are_refused_with_the_reason(server, body, status, fragment):
    """Only a request OpenRLHF's client never sends is an error: not one reward per rollout."""
    import httpx
    r = httpx.post(server + "/openrlhf", json=body, timeout=60,
                   headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == status, r.text
    assert fragment in r.text


PROMPT = "<|im_start|>user\nWrite a faster dot kernel, please.<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("query,prompt,label,code,fragment", [
    ("p x", "p ", '{"task": "nope"}', 2, "no built-in"),
    ("p x", "p ", "", 2, "no built-in"),  # an empty label column
    ("p x", "p ", '{"task": "dot", "x": 1}', 2, "unknown fields"),
    ("p x", "p ", '{"task": "dot", "sizes": "0"}', 2, "bad label"),
    ("p x", "p ", {"task": "dot", "stage": True}, 2, "stage"),
    ("p x", "p ", {"task": "dot", "opened": "no"}, 2, "opened"),
    ("p x", "p ", [1, 2], 2, "task name or an object"),
    ("q x", PROMPT, "dot", 3, "does not start"),  # nothing of the prompt in the query
])
def test_a_rollout_that_cannot_be_judged_gets_a_neutral_number_and_its_reason(
        server, query, prompt, label, code, fragment):
    """OpenRLHF 0.11.2's client drops a 4xx's reason, retries 5 times and leaves the reward
    None, which its experience maker cannot take: every rollout gets a number."""
    import httpx
    r = httpx.post(server + "/openrlhf", json={"query": [query], "prompts": [prompt],
                                               "labels": [label]},
                   timeout=60, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["rewards"] == [0.0]  # neutral: nothing of this prompt scored before
    assert out["extra_logs"]["perfgym_reason"] == [float(code)]
    assert out["extra_logs"]["perfgym_refused"] == [1.0]
    assert fragment in out["reasons"][0]


def test_a_prompt_cut_from_the_left_is_judged_on_its_answer(server):
    """OpenRLHF cuts a prompt longer than --max_len from the left (its token ids), so the
    query starts with the prompt's tail, after a broken character: the answer is still found."""
    import httpx
    answer = ANSWERS["no_code"]
    body = {"query": ["\ufffd" + PROMPT[-30:] + answer], "prompts": [PROMPT],
            "labels": [LABEL]}
    out = httpx.post(server + "/openrlhf?reward=tiered", json=body, timeout=300,
                     headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert out["extra_logs"]["perfgym_truncated"] == [1.0]
    assert out["extra_logs"]["perfgym_reason"] == [0.0] and out["rewards"] == [-100.0]
    assert "cut from the left" in out["reasons"][0]


def test_openrlhf_client_gets_a_number_for_a_cut_prompt_and_an_empty_label(rows, server,
                                                                           tmp_path):
    tokenizer, dataset = rows
    _, prompt, label, _ = dataset[0]
    url = server.replace("http://", f"http://perfgym:{TOKEN}@") + "/openrlhf?reward=tiered"
    from openrlhf.utils.agent import SingleTurnAgentExecutor
    engine = AnsweringEngine(tokenizer, ANSWERS["wrong_answer"])
    length = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    # max_len 200 tokens short of the prompt and its answer: OpenRLHF cuts the prompt
    params = SimpleNamespace(max_tokens=len(engine.ids), logprobs=None)
    out = asyncio.run(SingleTurnAgentExecutor(url).execute(
        prompt, label, params, length + len(engine.ids) - 200, tokenizer, engine))
    assert out["reward"] == [eval_reward("wrong_answer", tmp_path)]
    assert out["extra_logs"]["perfgym_truncated"] == [1.0]
    out = rollout(url, tokenizer, prompt, "", ANSWERS["naive"])
    assert out["reward"] is not None and out["extra_logs"]["perfgym_reason"] == [2.0]


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
