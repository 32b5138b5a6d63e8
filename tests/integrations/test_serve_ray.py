"""`perfgym serve --ray-address`: the HTTP service judges on a Ray cluster's benchmark nodes.

A one-node Ray cluster whose node is a benchmark node (`ray start --head --block`, in a process
group of its own that the test ends; a home of its own for Ray's token), and `perfgym serve`
joined to it: an answer sent to either route is judged on that node."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="the cluster extra is not installed: pip install 'perfgym[cluster]'")
pytest.importorskip("fastapi", reason="perfgym serve needs the serve extra: pip install 'perfgym[serve]'")
httpx = pytest.importorskip("httpx", reason="the test extra is not installed: "
                            "pip install 'perfgym[test]'")

from answers import ANSWERS, LABEL  # noqa: E402
from service import free_port  # noqa: E402


def forget_cluster(port: int) -> None:
    """Remove Ray's note of the current cluster when it names the head just ended: a head
    killed rather than stopped leaves it, and a later ray.init() with no address would try
    to join the dead cluster."""
    note = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    try:
        if note.read_text().strip().endswith(f":{port}"):
            note.unlink()
    except OSError:
        pass


def test_serve_lists_ray_address():
    out = subprocess.run([sys.executable, "-m", "perfgym.cli", "serve", "--help"],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "COLUMNS": "200"})
    assert "--ray-address" in out.stdout


@pytest.fixture
def cluster():
    home = tempfile.mkdtemp(prefix="perfgym-ray-home-")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "HOME": home,
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    if shutil.which("ray", path=env["PATH"]) is None:
        pytest.skip("the ray command is not on PATH: pip install 'perfgym[cluster]'")
    port = free_port()
    head = subprocess.Popen(["ray", "start", "--head", "--block", f"--port={port}",
                             "--num-cpus=1", '--resources={"bench_node": 1}',
                             "--include-dashboard=false", "--disable-usage-stats"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        yield f"127.0.0.1:{port}", env
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # this head and what it started, nothing else
        try:  # `ray start --block` outlived 30 s of this grace in every run (the teardown
            head.wait(timeout=5)  # took 32 s of CI): a short one, then its group is killed
        except subprocess.TimeoutExpired:
            pass
        time.sleep(2)
        try:  # what is still shutting down in its group goes now
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        forget_cluster(port)
        shutil.rmtree(home, ignore_errors=True)


def test_both_routes_judge_on_the_clusters_benchmark_node(cluster):
    address, env = cluster
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ends = time.monotonic() + 180
    serve = None
    try:
        while True:  # until the head is up: the service refuses to start without it (exit 2)
            if serve is None or serve.poll() is not None:
                assert serve is None or serve.returncode == 2, serve.stdout.read().decode()
                assert time.monotonic() < ends, serve.stdout.read().decode()[-3000:]
                serve = subprocess.Popen([sys.executable, "-m", "perfgym.cli", "serve",
                                          "--no-auth", "--port", str(port), "--ray-address",
                                          address], env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            try:
                health = httpx.get(url + "/health", timeout=5).json()
                break
            except httpx.TransportError:
                time.sleep(0.5)
        assert health["ray_address"] == address
        # a compile error: built on the node, nothing timed beside the machine's other work
        code = ANSWERS["compile_error"].replace("double s = 0.0\n",
                                                f"double s = {uuid.uuid4().int % 10**9}.0\n")
        r = httpx.post(url + "/evaluate", json={"candidates": [{"task": "dot", "code": code,
                                                                "size": "N=200000"}]},
                       timeout=300)
        assert r.status_code == 200, r.text
        outcome = r.json()["results"][0]["outcome"]
        assert outcome["status"] == "COMPILE_ERROR" and outcome["config"].get("node")
        code = code.replace("double s = ", "double s = 1 + ")
        r = httpx.post(url + "/openrlhf", json={"query": ["p " + code], "prompts": ["p "],
                                                "labels": [LABEL]}, timeout=300)
        assert r.status_code == 200 and r.json()["rewards"] == [-40.0], r.text
        assert r.json()["extra_logs"]["perfgym_reason"] == [0.0]
    finally:
        if serve is not None and serve.poll() is None:
            os.killpg(serve.pid, signal.SIGTERM)
            serve.wait(timeout=30)
