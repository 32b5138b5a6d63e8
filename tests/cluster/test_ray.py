"""A real two-node Ray cluster on this machine: a head, and a worker marked as the benchmark
node, each started with `ray start`. Every timing must run on the benchmark node, and killing
that node mid-batch must still end with every request answered once, after a new one joins."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the cluster extra is not installed: pip install 'perfgym[cluster]'")

from perfgym import EvalConfig, Status, get_task  # noqa: E402
from perfgym.executors import Request  # noqa: E402

# the `ray` command of this interpreter's environment, activated or not, and a home of its
# own: Ray 2.60 leaves an auth token in ~/.ray after any local ray.init() (another test, an
# earlier run), and a `ray start` cluster then refuses this process's connection
HOME = tempfile.mkdtemp(prefix="perfgym-ray-home-")
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "HOME": HOME,
       "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_worker(address):
    """A benchmark node in the foreground (--block), in its own process group to kill."""
    proc = subprocess.Popen(["ray", "start", "--block", f"--address={address}", "--num-cpus=1",
                             '--resources={"bench_node": 1}', "--disable-usage-stats"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    return proc


def wait_for_bench_nodes(n, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        alive = [x for x in ray.nodes() if x["Alive"] and x["Resources"].get("bench_node")]
        if len(alive) >= n:
            return alive
        time.sleep(0.2)
    raise TimeoutError("no benchmark node joined")


@pytest.fixture(scope="module")
def cluster():
    if shutil.which("ray", path=ENV["PATH"]) is None:
        pytest.skip("the ray command is not on PATH: pip install 'perfgym[cluster]'")
    port = free_port()
    address = f"127.0.0.1:{port}"
    subprocess.run(["ray", "start", "--head", f"--port={port}", "--num-cpus=1",
                    "--include-dashboard=false", "--disable-usage-stats"], env=ENV, check=True,
                   capture_output=True)
    worker = start_worker(address)
    saved_home = os.environ["HOME"]
    os.environ["HOME"] = HOME  # where this process's Ray client looks for a token
    try:
        ray.init(address=address, log_to_driver=False)
        wait_for_bench_nodes(1)
        yield address, worker
    finally:
        ray.shutdown()
        subprocess.run(["ray", "stop", "--force"], env=ENV, capture_output=True)
        os.environ["HOME"] = saved_home


def variants(n):
    naive = get_task("dgemm").baseline.read_text()
    return [naive.replace("void matmul_optimized(", f"static const int v{i} = {i};\n"
                          "void matmul_optimized(", 1) for i in range(n)]


def test_every_timing_runs_on_the_benchmark_node(cluster):
    from perfgym.executors.ray_executor import RayExecutor
    executor = RayExecutor()
    bench = {n["NodeID"] for n in executor.bench_nodes()}
    head = {n["NodeID"] for n in ray.nodes() if n["Alive"]} - bench
    task = get_task("dgemm")
    config = EvalConfig(use_cache=False, max_time=0.2, max_samples=10, min_samples=3)
    outs = executor.evaluate_many([Request(task, t, {"M": 64, "N": 64, "K": 64}, config)
                                   for t in variants(4)] + [Request(task, "garbage", None, config)])
    assert [o.status for o in outs] == [Status.OK] * 4 + [Status.FORMAT_ERROR]
    assert {o.config["node"] for o in outs} <= bench and head
    assert all(o.machine["id"] for o in outs[:4])  # the node's own fingerprint travels along


def test_grpo_rewards_are_judged_on_the_benchmark_node(cluster, tmp_path):
    """`perfgym train grpo --ray-address`: the reward function (and the multi-turn rollout,
    which takes the same executor) sends every completion to the cluster's benchmark node."""
    from perfgym.executors.ray_executor import RayExecutor
    from perfgym.store import RunStore
    from perfgym.train.grpo import PerfgymReward
    executor = RayExecutor()
    bench = {n["NodeID"] for n in executor.bench_nodes()}
    task = get_task("dgemm")
    config = EvalConfig(use_cache=False, max_time=0.2, max_samples=10, min_samples=3)
    store = RunStore(tmp_path / "run")
    reward = PerfgymReward(task, store, config, "tiered", G=2, executor=executor.evaluate_many)
    completions = [f"```c\n{v}```" for v in variants(2)] + ["no code", "no code either"]
    rewards = reward.score(["p"] * 4, completions, {})
    judged = [c.outcome for c in store.candidates()]
    assert [o["status"] for o in judged] == ["OK", "OK", "FORMAT_ERROR", "FORMAT_ERROR"]
    assert {o["config"]["node"] for o in judged[:2]} <= bench  # timed on the benchmark node
    assert rewards[0] > rewards[2]
    store.close()


def test_killing_the_benchmark_node_mid_batch(cluster):
    from perfgym.executors.ray_executor import RayExecutor
    address, worker = cluster
    executor = RayExecutor()
    task = get_task("dgemm")
    config = EvalConfig(use_cache=False, max_time=0.3, max_samples=20, min_samples=5)
    requests = [Request(task, t, None, config) for t in variants(8)]
    answered, replacement = [], []

    def on_result(i, outcome):
        answered.append(i)
        if len(answered) == 2 and not replacement:
            os.killpg(worker.pid, signal.SIGKILL)  # the node dies mid-batch
            time.sleep(1.0)
            replacement.append(start_worker(address))  # and a new one joins

    outs = executor.evaluate_many(requests, on_result=on_result)  # the replacement stays up
    assert replacement, "the kill should have happened mid-batch"
    assert sorted(answered) == list(range(8))  # every request answered, once
    assert all(o.status is Status.OK for o in outs)
    nodes = {o.config["node"] for o in outs}
    assert len(nodes) == 2  # some before the kill, the rest on the replacement


def test_identical_candidates_come_from_the_cache(cluster, tmp_path, monkeypatch):
    import sys

    from perfgym.cache import OutcomeCache
    from perfgym.executors.ray_executor import RayExecutor
    monkeypatch.setattr(sys.modules["perfgym.evaluate"], "_cache", OutcomeCache(tmp_path / "c"))
    executor = RayExecutor()
    assert executor.bench_machine()  # one benchmark node: one fingerprint
    task = get_task("dgemm")
    config = EvalConfig(max_time=0.2, max_samples=10, min_samples=3)
    text = variants(1)[0]
    first = executor.evaluate_many([Request(task, text, {"M": 32, "N": 32, "K": 32}, config)])[0]
    calls = []
    monkeypatch.setattr(executor.remote, "remote", lambda *a, **k: calls.append(a))
    again = executor.evaluate_many([Request(task, "/* same */\n" + text,
                                            {"M": 32, "N": 32, "K": 32}, config)])[0]
    assert first.ok and again.cached and again.gflops == first.gflops and calls == []


def test_a_bounded_caller_waits_for_busy_nodes_no_longer_than_its_bound(cluster):
    """A trainer's reward through the cluster (`perfgym serve --ray-address`) while every
    benchmark node is busy: no verdict past twice the bound, never an endless wait."""
    from perfgym.executors.ray_executor import RayExecutor
    from perfgym.lane import bounded
    executor = RayExecutor()
    executor.bench_machine()
    def hold(seconds: float) -> None:  # (nested: sent by value, this module is not the node's)
        import time
        time.sleep(seconds)
    busy = ray.remote(hold).options(num_cpus=0, resources={"bench_node": 1}).remote(60)
    deadline = time.time() + 60
    while ray.available_resources().get("bench_node", 0) > 0:  # until it holds the node
        assert time.time() < deadline, "the busy task never started"
        time.sleep(0.1)
    try:
        task = get_task("dgemm")
        config = EvalConfig(use_cache=False, max_time=0.2, max_samples=10, min_samples=3)
        started = time.monotonic()
        with bounded(1.0):
            out = executor.evaluate_many([Request(task, variants(1)[0], None, config)])[0]
        waited = time.monotonic() - started
    finally:
        ray.cancel(busy, force=True)
    assert out.status is Status.HOST_ERROR and "did not answer within 2 s" in out.message
    assert 2.0 <= waited < 10.0
