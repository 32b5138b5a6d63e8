"""`perfgym serve` started as a user would, then talked to over HTTP."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install 'perfgym[serve]'")

from perfgym import get_task  # noqa: E402
from perfgym.client import RewardClient, RewardServiceError  # noqa: E402
from service import running_service  # noqa: E402

TOKEN = "test-token-123"


@pytest.fixture(scope="module")
def server():
    with running_service("--max-batch", "8", "--max-body", "200000", token=TOKEN) as (_, url, _c):
        yield url


def test_batch_with_token(server):
    task = get_task("dgemm")
    naive = task.baseline.read_text()
    client = RewardClient(server, TOKEN, timeout=120)
    results = client.evaluate([
        {"task": "dgemm", "code": naive, "size": "32"},
        {"task": "dgemm", "code": "no code here", "size": "32"},
        {"task": "dgemm", "code": task.expert.read_text(), "size": "32", "stage": 3},
    ], reward="tiered")
    assert [r["outcome"]["status"] for r in results] == ["OK", "FORMAT_ERROR", "STAGE_VIOLATION"]
    assert results[0]["reward"] == pytest.approx(results[0]["outcome"]["gflops"])
    assert [r["reward"] for r in results[1:]] == [-100, -100]
    names = {t["name"] for t in client.tasks()}
    assert {"dgemm", "spmv", "relu"} <= names
    health = client.health()
    assert health["status"] == "ok" and health["candidates"] >= 3


def test_groups_are_scored_apart(server):
    naive = get_task("dgemm").baseline.read_text()
    client = RewardClient(server, TOKEN, timeout=120)
    results = client.evaluate([{"task": "dgemm", "code": naive, "size": "32", "group": "a"},
                               {"task": "dgemm", "code": naive, "size": "64", "group": "b"}],
                              reward="group_normalized")
    assert [r["reward"] for r in results] == [100.0, 100.0]  # each is its group's best


def test_opened_answers_get_the_opening_and_no_reward_for_it(server):
    """A caller that prefilled the task's answer_start sends only what its model wrote."""
    from perfgym.train.sft_data import opened_body
    client = RewardClient(server, TOKEN, timeout=120)
    dot = next(t for t in client.tasks() if t["name"] == "dot")
    assert dot["answer_start"].endswith(dot["entry"] + " {")
    body = opened_body(get_task("dot"), get_task("dot").baseline.read_text())
    results = client.evaluate([
        {"task": "dot", "code": body, "size": "1000", "opened": True, "group": "o"},
        {"task": "dot", "code": body + "\nint stray;", "size": "1000", "opened": True,
         "group": "o"},  # cut at the entry's brace, as the policies cut what they generate
        {"task": "dot", "code": " ; }", "size": "1000", "opened": True, "group": "o"},
        {"task": "dot", "code": body, "size": "1000", "group": "w"},  # not told: not joined
    ], reward="tiered")
    assert [r["outcome"]["status"] for r in results] == ["OK", "OK", "FORMAT_ERROR",
                                                         "FORMAT_ERROR"]
    assert results[0]["reward"] == pytest.approx(results[0]["outcome"]["gflops"])
    assert results[2]["reward"] == -100  # an empty body earns nothing from the opening
    bad = [({"candidates": [{"task": "dot", "code": body, "opened": True, "group": "g"},
                            {"task": "dot", "code": "x", "group": "g"}]}, "mixes opened"),
           ({"candidates": [{"task": "relu", "code": "x", "opened": True}]}, "has no opening")]
    for request, fragment in bad:
        with pytest.raises(RewardServiceError) as exc:
            client._call("POST", "/evaluate", request)
        assert "HTTP 400" in str(exc.value) and fragment in str(exc.value)


def test_without_or_with_a_wrong_token(server):
    for client in (RewardClient(server, None), RewardClient(server, "wrong")):
        with pytest.raises(RewardServiceError, match="401"):
            client.evaluate([{"task": "dgemm", "code": "x"}])
        with pytest.raises(RewardServiceError, match="401"):
            client.tasks()
    assert RewardClient(server, None).health()["status"] == "ok"  # liveness stays open


@pytest.mark.parametrize("body, code, fragment", [
    ({"candidates": [{"task": "nope", "code": "x"}]}, 400, "unknown task"),
    ({"candidates": [{"task": "dgemm", "code": "x", "size": "M=1"}]}, 400, "must give exactly"),
    ({"candidates": [{"task": "dgemm", "code": "x", "size": ""}]}, 400, "size is empty"),
    ({"candidates": [{"task": "dgemm", "code": "x", "size": "  "}]}, 400, "size is empty"),
    ({"candidates": []}, 422, ""),
    ({"candidates": [{"task": "dgemm", "code": "x"}], "reward": "best"}, 422, ""),
    ({"candidates": [{"task": "dgemm", "code": "x", "stage": 9}]}, 422, ""),
    ({"candidates": [{"task": "dgemm", "code": "x"}] * 9}, 422, "limit is 8"),
    ({"candidates": [{"task": "dgemm", "code": "x" * 250_000}]}, 413, "over the limit"),
])
def test_bad_requests(server, body, code, fragment):
    client = RewardClient(server, TOKEN)
    with pytest.raises(RewardServiceError) as exc:
        client._call("POST", "/evaluate", body)
    assert f"HTTP {code}" in str(exc.value) and fragment in str(exc.value)


def test_not_json(server):
    import urllib.error
    import urllib.request
    req = urllib.request.Request(server + "/evaluate", data=b"{not json", method="POST",
                                 headers={"Authorization": f"Bearer {TOKEN}",
                                          "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req)
    assert exc.value.code == 422


def test_schemathesis_finds_no_server_errors(server):
    """Property-based requests generated from the OpenAPI schema: no 5xx answers."""
    cli = Path(sys.executable).parent / "schemathesis"  # this environment's, activated or not
    r = subprocess.run([str(cli) if cli.exists() else "schemathesis", "run", f"{server}/openapi.json", "--checks",
                        "not_a_server_error", "--max-examples", "25", "-H",
                        f"Authorization: Bearer {TOKEN}", "--request-timeout", "120"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_openapi_schema(server):
    import urllib.request
    schema = json.loads(urllib.request.urlopen(server + "/openapi.json").read())
    assert {"/evaluate", "/tasks", "/health"} <= set(schema["paths"])


def test_a_refused_reward_is_null_not_a_server_error(monkeypatch):
    # a timing disturbed by other programs is refused (NaN inside); JSON has no NaN, so the
    # service answers null, with the outcome saying why
    from fastapi.testclient import TestClient

    from perfgym import serve
    from perfgym.outcome import Outcome, Status

    def disturbed(requests):
        return [Outcome(status=Status.OK, task=r.task.name, sizes={}, gflops=1.0,
                        disturbed="other programs used the CPU") for r in requests]

    monkeypatch.setattr(serve, "evaluate_many", disturbed)
    client = TestClient(serve.create_app(None))
    r = client.post("/evaluate", json={"candidates": [{"task": "dot", "code": "x"}]})
    assert r.status_code == 200 and "NaN" not in r.text, r.text
    (result,) = r.json()["results"]
    assert result["reward"] is None and result["outcome"]["disturbed"]
