"""The openai policy against a real OpenAI-compatible server: `transformers serve` with the
default model (SmolLM2-135M-Instruct) on 127.0.0.1. Faults the server cannot be asked for (a
400 for one request, dying mid-run) come from a pass-through proxy in front of it.

transformers serve ignores `n` (one choice per request) and rejects top_k/min_p (422): both are
real behaviours the policy has to handle here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("openai", reason="the llm extra is not installed: pip install 'perfgym[llm]'")
pytest.importorskip("fastapi", reason="transformers serve needs the serve extra: "
                    "pip install 'perfgym[serve]'")


@pytest.fixture(scope="module")
def server():
    from model_server import transformers_serve

    from perfgym.models import resolve_model
    model = str(resolve_model(quiet=True))
    with transformers_serve(model) as url:
        yield {"url": url, "model": model}


class FaultProxy:
    """Forwards every request to the server, except: request number `refuse` (1-based) is
    answered 400, and after `die_after` requests the proxy stops listening (a dead server)."""

    def __init__(self, upstream: str, refuse: int | None = None,
                 die_after: int | None = None) -> None:
        self.upstream, self.refuse, self.die_after = upstream, refuse, die_after
        self.count = 0
        self.bodies: list[dict] = []
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with lock:
                    proxy.count += 1
                    number = proxy.count
                proxy.bodies.append(json.loads(body))
                if number == proxy.refuse:
                    return self._send(400, json.dumps({"error": {
                        "message": "prompt is too long for this test", "type": "invalid"}}))
                request = urllib.request.Request(proxy.upstream + self.path, data=body,
                                                 headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=600) as reply:
                        self._send(reply.status, reply.read().decode())
                except urllib.error.HTTPError as exc:
                    self._send(exc.code, exc.read().decode())
                if proxy.die_after is not None and number >= proxy.die_after:
                    threading.Thread(target=proxy.stop).start()

            def _send(self, code: int, text: str) -> None:
                data = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _search(tmp_path, url, model, *extra):
    cmd = [sys.executable, "-m", "perfgym.cli", "search", "--policy", "openai",
           "--base-url", url, "--model", model, "--max-tokens", "24", "--temperature", "0.7",
           "--run-dir", str(tmp_path / "run"), "--json", *extra]
    env = {**os.environ, "OPENAI_API_KEY": "EMPTY"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


def _candidates(tmp_path):
    from perfgym.store import RunStore
    store = RunStore(tmp_path / "run")
    try:
        return store.candidates()
    finally:
        store.close()


def test_best_of_n_tops_up_a_server_that_ignores_n_and_survives_a_400(server, tmp_path):
    # request 1 asks n=3 with top_k/min_p (422), request 2 without them (one choice back),
    # requests 3 and 4 top up one each: the proxy refuses request 3
    proxy = FaultProxy(server["url"], refuse=3)
    try:
        done = _search(tmp_path, proxy.url, server["model"], "--algo", "best-of-n", "--n", "3",
                       "--concurrency", "3")
    finally:
        proxy.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    found = _candidates(tmp_path)
    assert len(found) == 3
    # the server answered one choice for n=3: the other two were asked for separately, each
    # with a seed of its own
    asked = [b.get("n") for b in proxy.bodies]
    assert asked.count(3) == 2 and asked.count(1) == 2, asked
    assert len({b.get("seed") for b in proxy.bodies if b.get("n") == 1}) == 2
    assert "top_k" in proxy.bodies[0] and "top_k" not in proxy.bodies[1]
    refused = [c for c in found if "server refused this request (400)" in c.completion]
    assert len(refused) == 1 and refused[0].outcome["status"] == "FORMAT_ERROR"
    assert all(c.outcome is not None for c in found)  # the run went on and scored them all
    assert "does not take top_k" in done.stderr  # the 422 for our extras, handled once
    assert (tmp_path / "run" / "report" / "summary.md").is_file()


def test_the_default_model_samples_on_a_server_that_takes_its_defaults(server):
    # transformers serve takes do_sample from the model's generation config: the converted
    # model says True, so four samples of one prompt are not four copies of one answer
    from perfgym.policies.openai_compat import OpenAIPolicy
    policy = OpenAIPolicy(model=server["model"], base_url=server["url"] + "/v1", api_key="x")
    texts = policy.generate(["Name a fruit."], 4, max_tokens=12, temperature=1.0)[0]
    assert len(texts) == 4 and len(set(texts)) >= 2, texts


def test_a_server_dying_mid_run_loses_nothing_and_resume_continues(server, tmp_path):
    proxy = FaultProxy(server["url"], die_after=1)
    first = _search(tmp_path, proxy.url, server["model"], "--algo", "refine", "--turns", "2",
                    "--top-k", "0", "--min-p", "0")
    assert first.returncode == 2, first.stderr[-2000:]
    assert "--resume" in first.stderr and "Traceback" not in first.stderr
    kept = _candidates(tmp_path)
    assert len(kept) == 1 and kept[0].outcome is not None

    proxy = FaultProxy(server["url"])
    try:
        second = _search(tmp_path, proxy.url, server["model"], "--algo", "refine", "--turns",
                         "2", "--top-k", "0", "--min-p", "0", "--resume")
    finally:
        proxy.stop()
    assert second.returncode == 0, second.stderr[-2000:]
    found = _candidates(tmp_path)
    assert len(found) == 2
    assert (found[0].id, found[0].completion) == (kept[0].id, kept[0].completion)
    # the second turn's prompt carries the parent's code, not its raw answer: no fence of the
    # parent's nests inside the template's one code block
    from perfgym.search.engine import parent_code
    from perfgym.tasks import get_task
    prompt = proxy.bodies[0]["messages"][-1]["content"]
    shown = parent_code(get_task("dgemm"), kept[0])
    assert shown.strip() in prompt and "```" not in shown
    assert found[1].parent_id == found[0].id


def test_an_opened_answer_reaches_the_model_through_the_completions_endpoint(server):
    # the policy renders the chat template with the model's own tokenizer (the model is a
    # local directory), appends the opening and asks /v1/completions: greedy, the server's
    # continuation is the one the local policy computes from the same text
    from perfgym.opening import answer_start, full_answer
    from perfgym.policies.hf import HFPolicy
    from perfgym.policies.openai_compat import OpenAIPolicy
    from perfgym.tasks import get_task
    task = get_task("dot")
    prompt = f"Complete this C function.\n{task.entry}"
    opening = answer_start(task)
    proxy = FaultProxy(server["url"])
    try:
        policy = OpenAIPolicy(model=server["model"], base_url=proxy.url, api_key="x")
        (served,), = policy.generate([prompt], 1, openings=[opening], temperature=0,
                                     max_tokens=40)
    finally:
        proxy.stop()
    sent = proxy.bodies[0]
    assert sent["prompt"].endswith(opening) and "<|im_start|>assistant" in sent["prompt"]
    assert sent["stop"] == ["\n}"]
    local = HFPolicy(server["model"])
    (here,), = local.generate([prompt], 1, openings=[opening], temperature=0, max_tokens=40)
    assert served.strip() and served[:30] == here[:30], (served, here)
    assert full_answer(opening, served).startswith(opening)
