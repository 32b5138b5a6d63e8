"""`perfgym serve` under abuse: bodies too big to declare, clients that stall, a big request
being checked while /health must answer, and a server error on a connection that stays usable.
Every test talks to a real server on loopback."""
import http.client
import json
import socket
import threading
import time

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install 'perfgym[serve]'")

from perfgym import get_task  # noqa: E402
from perfgym.client import RewardClient, RewardServiceError  # noqa: E402
from service import free_port, running_service  # noqa: E402

TOKEN = "abuse-token"
MAX_BODY = 1 << 20
IDLE, DEADLINE = 1.0, 3.0  # the server's timeouts here (seconds)


@pytest.fixture(scope="module")
def server():
    with running_service("--max-body", str(MAX_BODY), token=TOKEN, timeout=10,
                         env={"PERFGYM_SERVE_IDLE_TIMEOUT": str(IDLE),
                              "PERFGYM_SERVE_REQUEST_TIMEOUT": str(DEADLINE)}) as (proc, url, _):
        yield proc, int(url.rsplit(":", 1)[1])


def rss(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10
    raise AssertionError("no VmRSS")


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def head(path: str, extra: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\n{extra}\r\n").encode()


def answer(sock: socket.socket) -> tuple[int, bytes]:
    """(status, everything the server sent until it closed the connection)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    assert data, "the server closed the connection without an answer"
    return int(data.split()[1]), data


def test_chunked_body_over_the_limit_is_413_without_being_read(server):
    proc, port = server
    before = rss(proc.pid)
    sock = connect(port)
    sock.sendall(head("/evaluate", "Transfer-Encoding: chunked\r\n"))
    chunk = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
    sent, started = 0, time.monotonic()
    sock.settimeout(2)
    try:
        while sent < 200 << 20:  # 200 MB, if the server read it all
            sock.sendall(chunk)
            sent += len(chunk)
    except (socket.timeout, BrokenPipeError, ConnectionResetError):
        pass  # the server stopped reading
    sock.settimeout(10)
    status, data = answer(sock)
    assert status == 413 and b"over the limit" in data
    assert sent < 50 << 20, f"the server read {sent} bytes before answering"
    assert rss(proc.pid) - before < 50 << 20
    assert time.monotonic() - started < 30


def test_declared_length_over_the_limit_is_413_at_once(server):
    _, port = server
    sock = connect(port)
    sock.sendall(head("/evaluate", "Content-Length: 1000000000000\r\n"))
    assert answer(sock)[0] == 413


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_client_stalling_mid_body_is_dropped(server, declared):
    _, port = server
    sock = connect(port)
    started = time.monotonic()
    if declared:
        sock.sendall(head("/evaluate", "Content-Length: 1000\r\n") + b'{"candidates": [')
    else:
        sock.sendall(head("/evaluate", "Transfer-Encoding: chunked\r\n") + b"5\r\n{\"can\r\n")
    status, data = answer(sock)  # then nothing more: the server must give up
    assert status == 408 and b"did not arrive in time" in data
    assert time.monotonic() - started < IDLE + 10


def test_a_body_trickling_in_meets_the_request_deadline(server):
    _, port = server
    sock = connect(port)
    sock.sendall(head("/evaluate", "Content-Length: 100000\r\n"))
    started = time.monotonic()
    sock.settimeout(0.3)
    data = b""
    while not data and time.monotonic() - started < DEADLINE + 15:
        try:
            sock.send(b" ")  # one byte every 0.3 s: never idle for IDLE seconds
            data = sock.recv(65536)
        except socket.timeout:
            continue
        except (BrokenPipeError, ConnectionResetError):
            break
    assert data.startswith(b"HTTP/1.1 408"), data[:200]
    assert DEADLINE - 0.5 < time.monotonic() - started < DEADLINE + 10


def test_a_client_stalling_in_its_headers_is_dropped(server):
    _, port = server
    sock = connect(port)
    started = time.monotonic()
    sock.sendall(b"POST /evaluate HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    assert sock.recv(65536) == b""  # closed, without an answer: there was no request
    assert time.monotonic() - started < DEADLINE + 10


def test_a_refused_body_leaves_the_server_serving(server):
    _, port = server
    for _ in range(3):  # each refusal closes only its own connection
        sock = connect(port)
        sock.sendall(head("/evaluate", "Transfer-Encoding: chunked\r\n") + b"zz\r\n")
        assert answer(sock)[0] in (400, 413)
    assert RewardClient(f"http://127.0.0.1:{port}", TOKEN).health()["status"] == "ok"


def test_health_answers_while_a_big_request_is_checked(server):
    """A batch of worst-case texts (what once held the interpreter for minutes) is checked in
    worker threads while /health keeps answering from the event loop."""
    _, port = server
    url = f"http://127.0.0.1:{port}"
    each = (MAX_BODY - 4096) // 4 // 2  # four candidates, JSON escapes at most double a byte
    worst = ["a += b * c " * (each // 11), "\n" * each, "__attribute__((" * (each // 15),
             '"\\' * (each // 2)]
    entry = get_task("dgemm").signature.c_decl()  # defined, so every static check reads it
    body = {"candidates": [{"task": "dgemm", "code": entry + " {\n" + w + "\n}\n", "size": "16"}
                           for w in worst], "use_cache": False}
    result: dict = {}

    def evaluate():
        try:
            result["answer"] = RewardClient(url, TOKEN, timeout=300)._call("POST", "/evaluate",
                                                                             body)
        except Exception as exc:  # reported by the assertion below
            result["error"] = exc

    worker = threading.Thread(target=evaluate)
    worker.start()
    slowest = 0.0
    while worker.is_alive():
        started = time.monotonic()
        assert RewardClient(url, TOKEN, timeout=30).health()["status"] == "ok"
        slowest = max(slowest, time.monotonic() - started)
        time.sleep(0.1)
    worker.join()
    assert "error" not in result, result.get("error")
    statuses = [r["outcome"]["status"] for r in result["answer"]["results"]]
    assert len(statuses) == 4 and "HOST_ERROR" not in statuses and "OK" not in statuses
    assert slowest < 5.0, f"/health took {slowest:.1f} s while the batch was checked"


def test_a_server_error_is_an_answer_on_a_usable_connection(monkeypatch):
    """An internal fault (here the evaluator raising) is a JSON 500, and the same keep-alive
    connection carries the next request."""
    import uvicorn

    from perfgym import serve
    monkeypatch.setattr(serve, "evaluate_many", lambda requests: 1 / 0)
    app = serve.create_app(None, request_timeout=DEADLINE, idle_timeout=IDLE)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical",
                            http=serve.header_deadline_protocol(DEADLINE))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(300):
            if server.started:
                break
            time.sleep(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/evaluate", json.dumps({"candidates": [{"task": "dgemm",
                                                                      "code": "x"}]}),
                     {"Content-Type": "application/json"})
        first = conn.getresponse()
        detail = json.loads(first.read())["detail"]
        assert first.status == 500 and "ZeroDivisionError" in detail
        conn.request("GET", "/health")  # the same connection
        second = conn.getresponse()
        assert second.status == 200 and json.loads(second.read())["status"] == "ok"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_an_ordinary_client_reads_the_413_of_a_body_over_the_limit(server):
    """A body 11x the limit, sent whole at once (no Expect: 100-continue): the server reads and
    drops it before answering, so the client reads the 413, every time, not a reset."""
    _, port = server
    client = RewardClient(f"http://127.0.0.1:{port}", TOKEN, timeout=30)
    for _ in range(5):
        with pytest.raises(RewardServiceError, match="413"):
            client.evaluate([{"task": "dgemm", "code": "x" * 190_000}] * 60)
    body = b"x" * (3 * MAX_BODY)
    for _ in range(5):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/evaluate", body, {"Authorization": f"Bearer {TOKEN}",
                                                 "Content-Type": "application/json"})
        assert conn.getresponse().status == 413
        conn.close()


def test_a_client_expecting_100_continue_gets_the_413_before_sending(server):
    _, port = server
    sock = connect(port)
    sock.sendall(head("/evaluate", f"Content-Length: {2 * MAX_BODY}\r\n"
                                   "Expect: 100-continue\r\n"))
    status, data = answer(sock)  # the body was never sent
    assert status == 413 and b"100 Continue" not in data


def test_a_body_past_the_drain_bound_is_not_read(server):
    """Far past the bound the server does not read on: the client gets its error (a 413 or a
    cut connection), as the client's own exception, never a bare socket one."""
    _, port = server
    client = RewardClient(f"http://127.0.0.1:{port}", TOKEN, timeout=30)
    with pytest.raises(RewardServiceError, match="413|reset|connection failed|Broken pipe"):
        client.evaluate([{"task": "dgemm", "code": "x" * 190_000}] * 120)


@pytest.mark.parametrize("field", ["code", "task", "size", "group"])
def test_a_lone_surrogate_is_a_bad_request_not_a_server_error(server, field):
    """Valid JSON ("\\ud800") that no UTF-8 text can hold: 422, and the answer that echoes it
    is still sent (FastAPI's own encoding of it failed: a 500)."""
    _, port = server
    client = RewardClient(f"http://127.0.0.1:{port}", TOKEN, timeout=30)
    candidate = {"task": "dgemm", "code": "void f(void) {}", field: "x\ud800"}
    with pytest.raises(RewardServiceError, match="HTTP 422.*valid string"):
        client.evaluate([candidate])
