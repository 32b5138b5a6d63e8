"""perfgym's verifiers environment, evaluated by verifiers' own `vf-eval` with the default
model behind a real OpenAI-compatible server (`transformers serve`), single- and multi-turn.

Nothing is mocked. One pass-through proxy sits between verifiers and the server: transformers
serve ends a chat stream with its finish chunk but without OpenAI's closing `data: [DONE]`
event, which verifiers 0.4 requires, so the proxy adds it (and nothing else). verifiers runs
the model under its `null` chat harness in a local subprocess, prepared with `uv` (the
`verifiers` extra installs it; its first run fetches the harness's packages from PyPI).
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("verifiers.v1", reason="the verifiers extra is not installed: pip install "
                    "'perfgym[verifiers]'")
pytest.importorskip("fastapi", reason="transformers serve needs the serve extra: pip install 'perfgym[serve]'")
pytest.importorskip("transformers", reason="transformers serve needs the local extra: pip install 'perfgym[local]'")

from answers import SIZE, TASK  # noqa: E402


class DoneProxy:
    """Forwards every request to `upstream`; a streamed answer without the closing
    `data: [DONE]` event gets it appended."""

    def __init__(self, upstream: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = urllib.request.Request(upstream + self.path, data=body,
                                                 headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=600) as reply:
                        status, kind, data = (reply.status, reply.headers["Content-Type"],
                                              reply.read())
                except urllib.error.HTTPError as exc:
                    status, kind, data = exc.code, exc.headers["Content-Type"], exc.read()
                if "event-stream" in (kind or "") and b"data: [DONE]" not in data:
                    data = data.rstrip(b"\n") + b"\n\ndata: [DONE]\n\n"
                self.send_response(status)
                self.send_header("Content-Type", kind or "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server():
    from model_server import transformers_serve

    from perfgym.models import resolve_model
    model = str(resolve_model(quiet=True))
    with transformers_serve(model) as url:
        proxy = DoneProxy(url)
        try:
            yield {"url": proxy.url, "model": model}
        finally:
            proxy.stop()


def vf_eval(server, out: Path, *flags: str) -> list[dict]:
    """`vf-eval perfgym-kernels` on the dot task at the tests' size; its traces."""
    exe = shutil.which("vf-eval") or str(Path(sys.executable).parent / "vf-eval")
    run = subprocess.run([exe, "perfgym-kernels", "-m", server["model"], "--client.base-url",
                          server["url"] + "/v1", "--env.taskset.tasks", TASK,
                          "--env.taskset.sizes", SIZE, "--sampling.max-tokens", "128",
                          "-n", "1", "-r", "1", "--no-push", "--no-rich", "-o", str(out),
                          "--run.dir", "run", *flags],
                         capture_output=True, text=True, timeout=1200,
                         env={**os.environ, "PRIME_API_KEY": "none"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    episodes = [json.loads(line) for line in (out / "run" / "traces.jsonl").open()]
    assert episodes and all(e["ok"] and not e["errors"] for e in episodes), run.stdout[-3000:]
    return [trace for e in episodes for trace in e["traces"]]  # the agent's trace of each


def answers_of(trace: dict) -> list[str]:
    return [n["message"]["content"] or "" for n in trace["nodes"] if n.get("sampled")]


def eval_results(answers: list[str], tmp: Path) -> list[dict]:
    """`perfgym eval answer.md --reward tiered --json` for each answer."""
    out = []
    for i, text in enumerate(answers):
        path = tmp / f"turn{i}.md"
        path.write_text(text)
        run = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", str(path), "--task",
                              TASK, "--size", SIZE, "--json"], capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        out.append(json.loads(run.stdout))
    return out


def test_single_turn_reward_is_perfgym_evals(server, tmp_path):
    (trace,) = vf_eval(server, tmp_path / "single")
    answers = answers_of(trace)
    assert len(answers) == 1
    assert trace["rewards"]["perfgym"]["score"] == eval_results(answers, tmp_path)[0]["reward"]


def test_multi_turn_replies_with_the_gyms_feedback(server, tmp_path):
    (trace,) = vf_eval(server, tmp_path / "multi", "--env.turns", "2")
    answers = answers_of(trace)
    assert len(answers) == 2
    users = [n["message"]["content"] for n in trace["nodes"]
             if n["message"]["role"] == "user"]
    results = eval_results(answers, tmp_path)
    rewards = [r["reward"] for r in results]
    # the environment's reply: perfgym's repair prompt on a failed first answer, its improve
    # prompt on a passing one, carrying the gym's verdict
    first = ("Make this C kernel faster." if results[0]["status"] == "OK"
             else "Fix this C kernel.")
    assert len(users) == 2 and users[1].startswith(first), users[1][:200]
    # the best turn's reward (a repeated kernel scores the same, so it cannot change the best)
    assert trace["rewards"]["perfgym"]["score"] == max(rewards)
