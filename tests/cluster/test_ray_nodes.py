"""How the Ray executor meets its benchmark nodes, against a stand-in for Ray (no cluster).

Each benchmark node is probed on that node, once, when first seen: a node that joins while a
service runs too. Its probe is its fingerprint (a mixed cluster keeps nothing in the driver's
cache) and leaves a worker there with perfgym imported. An outcome of a node not probed to have
the benchmark nodes' fingerprint never enters the driver's cache under it. Evaluations ask
Ray to spread over the nodes: Ray's default prefers the driver's own node (a one-machine
cluster's head), and a second node on the same machine then took 19 of the 56 evaluations that
reached the nodes (benchmarks/rl_load.py)."""
from __future__ import annotations

import sys
import threading
import time
import types

import pytest

from perfgym import EvalConfig, Outcome, Status, get_task
from perfgym.executors import Request, ray_executor


class Ref:
    def __init__(self, fake: FakeRay, node: str, value, probe: bool = False) -> None:
        self.fake, self.node, self.value, self.probe = fake, node, value, probe

    @property
    def ready(self) -> bool:
        return not (self.probe and self.node in self.fake.held)


class Function:
    """ray.remote(f); its .options(...) is a Call, which has .remote but no .options of its
    own, as in Ray."""

    def __init__(self, fake: FakeRay, name: str) -> None:
        self.fake, self.name = fake, name

    def options(self, **options) -> Call:
        return Call(self.fake, self.name, options)

    def remote(self, *args) -> Ref:
        return Call(self.fake, self.name, {}).remote(*args)


class Call:
    def __init__(self, fake: FakeRay, name: str, options: dict) -> None:
        self.fake, self.name, self.opts = fake, name, options

    def remote(self, *args) -> Ref:
        fake = self.fake
        strategy = self.opts.get("scheduling_strategy")
        node = getattr(strategy, "node_id", None) or fake.route or fake.local  # (Ray's default)
        fake.sent.append((self.name, node, self.opts))
        if self.name == "_machine_here":
            time.sleep(0.01)  # (long enough for threads that ask at once to meet)
            return Ref(fake, node, fake.fingerprints[node], probe=True)
        outcome = Outcome(status=Status.OK, task="dot", sizes={"N": 1000},
                          machine={"id": fake.fingerprints[node]}).to_dict()
        return Ref(fake, node, {**outcome, "node": node})


class FakeRay:
    """Ray as the executor uses it: a driver on the head (`local`, a benchmark node as on one
    machine), benchmark nodes with their fingerprints, probes that may not answer yet (`held`)."""

    def __init__(self, fingerprints: dict[str, str]) -> None:
        self.fingerprints = dict(fingerprints)
        self.local = next(iter(fingerprints))
        self.route: str | None = None  # where evaluations run (None: the driver's node)
        self.held: set[str] = set()
        self.sent: list[tuple[str, str, dict]] = []

    def is_initialized(self) -> bool:
        return True

    def remote(self, fn) -> Function:
        return Function(self, fn.__name__)

    def nodes(self) -> list[dict]:
        return [{"NodeID": n, "Alive": True, "Resources": {"CPU": 1.0, "bench_node": 1.0}}
                for n in self.fingerprints]

    def wait(self, refs, num_returns=1, timeout=None):
        done = [r for r in refs if r.ready][:num_returns]
        return done, [r for r in refs if r not in done]

    def get(self, ref, timeout=None):
        return [r.value for r in ref] if isinstance(ref, list) else ref.value

    def cancel(self, ref, force=False) -> None:
        pass

    def probes(self) -> list[tuple[str, str | None]]:
        """Each probe sent: the node it ran on, and the node it was pinned to (None: not)."""
        return [(node, getattr(opts.get("scheduling_strategy"), "node_id", None))
                for name, node, opts in self.sent if name == "_machine_here"]

    def evaluations(self) -> list[str]:
        return [node for name, node, _ in self.sent if name == "_evaluate_here"]


class NodeAffinitySchedulingStrategy:
    def __init__(self, node_id: str, soft: bool) -> None:
        self.node_id, self.soft = node_id, soft


@pytest.fixture
def cluster(monkeypatch, tmp_path):
    """A stand-in Ray of two benchmark nodes, "head" (the driver's) and "second"; a cache of
    the test's own."""
    from perfgym.cache import OutcomeCache
    fake = FakeRay({"head": "kind-A", "second": "kind-A"})
    strategies = types.ModuleType("ray.util.scheduling_strategies")
    strategies.NodeAffinitySchedulingStrategy = NodeAffinitySchedulingStrategy
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setitem(sys.modules, "ray.util", types.ModuleType("ray.util"))
    monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)
    monkeypatch.setattr(sys.modules["perfgym.evaluate"], "_cache", OutcomeCache(tmp_path / "c"))
    return fake


def request(text: str = "double x;") -> Request:
    return Request(get_task("dot"), f"```c\n{text}\n```", {"N": 1000}, EvalConfig())


def test_each_benchmark_node_is_probed_once_on_that_node(cluster):
    cluster.fingerprints["second"] = "kind-B"
    executor = ray_executor.RayExecutor("fake:1")
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(executor.bench_machine()))
               for _ in range(8)]  # a service's request threads, at once
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(cluster.probes()) == [("head", "head"), ("second", "second")]
    assert answers == [None] * 8  # two kinds of machine: nothing in the driver's cache


def test_a_node_that_joins_later_is_probed_there_without_holding_up_evaluations(
        cluster, monkeypatch):
    del cluster.fingerprints["second"]
    executor = ray_executor.RayExecutor("fake:1")
    assert executor.bench_machine() == "kind-A"
    monkeypatch.setattr(ray_executor, "NODES_EVERY", 0.0, raising=False)
    cluster.fingerprints["late"] = "kind-A"
    cluster.held.add("late")  # its worker is still starting
    cluster.route = "head"
    out = executor.evaluate_many([request()])[0]
    assert out.ok and out.config["node"] == "head"
    assert cluster.probes()[-1] == ("late", "late")
    cluster.held.clear()
    assert executor.bench_machine() == "kind-A"
    assert [p for p in cluster.probes() if p[0] == "late"] == [("late", "late")]  # once


def test_an_outcome_of_another_kind_of_machine_stays_out_of_the_driver_cache(
        cluster, monkeypatch):
    del cluster.fingerprints["second"]
    executor = ray_executor.RayExecutor("fake:1")
    assert executor.bench_machine() == "kind-A"
    monkeypatch.setattr(ray_executor, "NODES_EVERY", 0.0, raising=False)
    cluster.fingerprints["other"] = "kind-B"  # joins; its probe has not answered yet
    cluster.held.add("other")
    cluster.route = "other"
    first = executor.evaluate_many([request()])[0]
    again = executor.evaluate_many([request()])[0]
    assert first.machine["id"] == again.machine["id"] == "kind-B"
    assert not again.cached and cluster.evaluations() == ["other", "other"]  # asked again
    cluster.held.clear()
    assert executor.bench_machine() is None  # mixed, once the new node's probe answered


def test_evaluations_are_spread_over_the_benchmark_nodes(cluster):
    executor = ray_executor.RayExecutor("fake:1")
    executor.evaluate_many([request()])
    (options,) = [opts for name, _, opts in cluster.sent if name == "_evaluate_here"]
    # not Ray's default, which prefers the driver's node while it is free
    assert options["scheduling_strategy"] == "SPREAD"
    # on a benchmark node, as many at once as it has CPUs (test_ray_node_load.py, real Ray)
    assert options["resources"] == {"bench_node": ray_executor.BENCH_SLICE} and \
        options["num_cpus"] == 1
