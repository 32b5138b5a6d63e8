"""Policies: replay, OpenAI-compatible (against a real local HTTP server), and a tiny local
transformers model; refine and best-of-n through them."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from perfgym import EvalConfig
from perfgym.policies import PolicyError, make_policy
from perfgym.policies.replay import ReplayPolicy
from perfgym.search import SQD, BestOfN, Engine, Refine, SQDConfig
from perfgym.store import RunStore

from conftest import NAIVE_IKJ, WRONG

FAST = EvalConfig(max_time=0.2, max_samples=10, min_samples=3)


class FakeOpenAI(BaseHTTPRequestHandler):
    """Speaks POST /v1/chat/completions. The first request gets a 429 (to exercise the retry);
    it answers one choice per request whatever n says (as some servers do)."""

    requests: list[dict] = []
    fail_first = True

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeOpenAI.requests.append({"path": self.path, "body": body,
                                    "auth": self.headers.get("Authorization")})
        if FakeOpenAI.fail_first:
            FakeOpenAI.fail_first = False
            self._send(429, {"error": {"message": "slow down", "type": "rate_limit"}})
            return
        prompt = body["messages"][-1]["content"]
        text = WRONG if "Fix this" in prompt else NAIVE_IKJ
        self._send(200, {"id": "x", "object": "chat.completion", "created": 0,
                         "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": text}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                   "total_tokens": 2}})

    def _send(self, code, payload):
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    FakeOpenAI.requests, FakeOpenAI.fail_first = [], True
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_openai_policy_retries_and_tops_up(server):
    policy = make_policy("openai", model="tiny", base_url=server, api_key="sk-test",
                         concurrency=2)
    out = policy.generate(["Write a fast C kernel", "Fix this C kernel"], 3, temperature=0.5,
                          max_tokens=64)
    assert [len(o) for o in out] == [3, 3]
    assert out[0][0] == NAIVE_IKJ and out[1][0] == WRONG
    first = FakeOpenAI.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    assert first["body"]["temperature"] == 0.5 and first["body"]["max_tokens"] == 64
    assert len(FakeOpenAI.requests) == 1 + 6  # one 429, then one choice per request


def test_openai_policy_reports_a_dead_server():
    policy = make_policy("openai", model="tiny", base_url="http://127.0.0.1:9/v1",
                         max_retries=1, timeout=2)
    with pytest.raises(PolicyError, match="APIConnectionError"):
        policy.generate(["hi"], 1)


def test_refine_through_openai(server, tmp_path, dgemm):
    store = RunStore(tmp_path / "run")
    policy = make_policy("openai", model="tiny", base_url=server)
    best = Refine(Engine(store, policy, dgemm, FAST), turns=3, chains=2).run()
    cands = store.candidates()
    assert len(cands) == 6 and best.ok
    assert [c.op for c in cands if c.slot.startswith("refine:0:")] == ["generate", "improve",
                                                                       "improve"]
    # each turn's prompt carried the parent's code and measured outcome
    prompts = [r["body"]["messages"][-1]["content"] for r in FakeOpenAI.requests[1:]]
    assert any("Make this C kernel faster" in p and "GFLOP/s" in p for p in prompts)


def test_best_of_n_replay(tmp_path, replay_file, dgemm):
    store = RunStore(tmp_path / "run")
    best = BestOfN(Engine(store, ReplayPolicy(replay_file), dgemm, FAST), n=4).run()
    assert sorted(c.status for c in store.candidates()) == [
        "COMPILE_ERROR", "OK", "OK", "WRONG_ANSWER"]  # OpenMP is fine without stage rules
    assert best.ok


def test_replay_file_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x"}\n')
    with pytest.raises(PolicyError, match="completion"):
        ReplayPolicy(bad)
    with pytest.raises(PolicyError, match="does not exist"):
        ReplayPolicy(tmp_path / "missing.jsonl")


def test_sqd_with_a_tiny_local_model(tmp_path, dgemm):
    pytest.importorskip("transformers", reason="the train extra is not installed: pip install 'perfgym[train]'")
    from tiny_model import build_tiny_model
    path = build_tiny_model(Path(tmp_path) / "tiny")
    policy = make_policy("hf", model_path=path)
    store = RunStore(tmp_path / "run")
    engine = Engine(store, policy, dgemm, FAST, "tiered", {"max_tokens": 48, "temperature": 1.0})
    SQD(engine, SQDConfig(iterations=1, G=2)).run()
    cands = [c for c in store.candidates() if c.op != "seed"]
    assert len(cands) == 4  # seed improve + seed deepen, 2 children each
    assert all(c.status is not None and c.outcome for c in cands)  # everything ends in a status
    assert all(c.policy == "hf" for c in cands)


def test_template_override(tmp_path, dgemm):
    from perfgym.prompts import expand_prompt
    (tmp_path / "generate.txt").write_text("CUSTOM {entry}")
    assert expand_prompt(dgemm, "generate", override_dir=tmp_path) == f"CUSTOM {dgemm.entry}"
    # templates not overridden fall back to ours
    assert "Fix this C kernel" in expand_prompt(dgemm, "repair", "int x;", {"status": "TIMEOUT",
                                                                           "message": "slow"},
                                                override_dir=tmp_path)
