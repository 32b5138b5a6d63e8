"""The Ray executor: the same `evaluate_many` seam, on an existing Ray cluster.

Benchmark nodes carry a custom resource (`bench_node: 1`); every evaluation asks for a CPU and
a sliver of it (BENCH_SLICE), so it runs on a benchmark node, with that node's machine
fingerprint, measured peaks and outcome cache, and a node runs as many at once as it has CPUs,
as the local executor runs them on one machine: builds and checks side by side, each timing
alone (the node's lane is machine-wide); when each took the whole unit, a node of many CPUs
built one candidate at a time. Evaluations are spread over the benchmark nodes
(Ray's SPREAD strategy): Ray's default prefers the driver's own node, which a one-machine
cluster's head is, and then lets another node wait for its turn. Each benchmark node is probed
once, on that node, when first seen (a node that joins later is looked for every NODES_EVERY
seconds): its fingerprint, and a worker there with perfgym imported before its first evaluation.
When the benchmark nodes share one fingerprint, the driver's cache holds their outcomes too (of
nodes probed to have it), so an identical candidate is answered without a round trip. A task
whose node dies is retried by Ray and runs again when a benchmark node is back (or a new one
joins); the caller gets every answer, in order, once. A request that fails for good (an
exception on the node, retries spent) gets a HOST_ERROR Outcome like the local executor's; an
interrupted batch cancels what it sent (a killed worker's sandboxed commands die with it; the
node's next evaluation sweeps its work directories).
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from typing import Any, Callable, Sequence

from ..config import EvalConfig
from ..lane import Cancelled, LaneBusy, cancelled, wait_bound
from ..outcome import Outcome
from ..tasks import builtin_names
from .local import Request, host_error

BENCH_RESOURCE = "bench_node"
BENCH_SLICE = 0.01  # of a node's bench_node unit, per evaluation: the node's CPUs bound them
NODES_EVERY = 5.0  # seconds between looks for benchmark nodes that joined


def _task_ref(task) -> str:
    from ..tasks.torch_task import builtin_gpu_names
    if task.name in builtin_names() or task.name in builtin_gpu_names():
        return task.name
    return str(getattr(task, "path", None) or task.directory)


def _machine_here() -> str:
    """The fingerprint id of the node this runs on. Its worker stays, with perfgym imported,
    for the node's first evaluation."""
    from .. import machine
    return machine.summary(machine.machine_info())["id"]


_swept = False


def _evaluate_here(task_ref: str, text: str, size: dict | None,
                   config: dict[str, Any]) -> dict[str, Any]:
    """Runs on a benchmark node."""
    import ray

    from .. import evaluate, get_task, sandbox
    global _swept
    if not _swept:  # once per worker: what killed workers on this node left behind
        sandbox.sweep_stale()
        _swept = True
    fields = {f.name for f in dataclasses.fields(EvalConfig)}
    cfg = EvalConfig(**{k: tuple(v) if k == "extra_flags" else v for k, v in config.items()
                        if k in fields and k != "threads"}, threads=config.get("threads"))
    outcome = evaluate(get_task(task_ref), text, size, cfg).to_dict()
    outcome["node"] = ray.get_runtime_context().get_node_id()
    return outcome


class RayExecutor:
    def __init__(self, address: str | None = None, bench_resource: str = BENCH_RESOURCE,
                 max_retries: int = 10) -> None:
        try:
            import ray
        except ImportError:
            raise RuntimeError("the Ray executor needs the cluster extra: "
                               "pip install 'perfgym[cluster]'") from None
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:  # a local one-node cluster whose node is the benchmark node
                ray.init(resources={bench_resource: 1}, log_to_driver=False)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        self.ray = ray
        self.bench_resource = bench_resource
        self.remote = ray.remote(_evaluate_here).options(
            num_cpus=1, resources={bench_resource: BENCH_SLICE}, max_retries=max_retries,
            scheduling_strategy="SPREAD")
        probe = ray.remote(_machine_here)  # (what .options returns has no .options)
        self._probe_on = lambda node: probe.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        self._lock = threading.Lock()  # (request threads of a service share the executor)
        self._machines: dict[str, str] = {}  # benchmark node id -> its fingerprint id
        self._probing: dict[Any, str] = {}  # a probe not answered yet -> its node
        self._looked = -NODES_EVERY

    def bench_machine(self) -> str | None:
        """The benchmark nodes' fingerprint when they all share one (then their outcomes can
        live in the driver's cache too); None for a mixed cluster. The first call waits for
        every node's probe; a node that joins later is probed without waiting, and counts once
        its probe answers."""
        with self._lock:
            if time.monotonic() - self._looked >= NODES_EVERY:
                self._looked = time.monotonic()
                probed = set(self._machines) | set(self._probing.values())
                for node in self.bench_nodes():
                    if node["NodeID"] not in probed:  # on that node, whatever it runs
                        self._probing[self._probe_on(node["NodeID"]).remote()] = node["NodeID"]
            if not self._machines and not self._probing:
                raise RuntimeError(f"the Ray cluster has no benchmark node (resource "
                                   f"{self.bench_resource!r}): start one with `perfgym cluster "
                                   "up --address HEAD:PORT --bench`")
            self._collect(timeout=0 if self._machines else 120)
            if not self._machines:
                raise RuntimeError("no benchmark node of the Ray cluster answered its probe "
                                   "(within 120 s)")
            ids = set(self._machines.values())
        return ids.pop() if len(ids) == 1 else None

    def _collect(self, timeout: float) -> None:
        """The answered probes' fingerprints; a probe that failed (its node died) is dropped,
        and its node probed again if it is seen again."""
        if not self._probing:
            return
        done, _ = self.ray.wait(list(self._probing), num_returns=len(self._probing),
                                timeout=timeout)
        for ref in done:
            node = self._probing.pop(ref)
            with contextlib.suppress(Exception):  # (the node went: nothing to record)
                self._machines[node] = self.ray.get(ref)

    def bench_nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.ray.nodes() if n["Alive"] and
                n["Resources"].get(self.bench_resource, 0) > 0]

    def evaluate_many(self, requests: Sequence[Request], progress: bool = False,
                      on_result: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
        from ..cache import cache_key
        from ..evaluate import outcome_cache
        results: list[Outcome | None] = [None] * len(requests)
        keys: list[str | None] = [None] * len(requests)
        machine_id = self.bench_machine()
        index = {}
        for i, r in enumerate(requests):
            if machine_id and r.config.use_cache:
                keys[i] = cache_key(r.task, r.text, dict(r.size or r.task.default_size),
                                    r.config, machine_id)
                if (hit := outcome_cache().get(keys[i])) is not None:
                    results[i] = hit  # answered here: no round trip to the cluster
                    if on_result:
                        on_result(i, hit)
                    continue
            cfg = r.config.to_dict()
            cfg["threads"] = r.config.threads  # the node decides its own core count
            index[self.remote.remote(_task_ref(r.task), r.text, r.size, cfg)] = i
        pending = list(index)
        started = time.monotonic()
        # a bounded caller (a trainer's reward) waits for the cluster as long as two holds of
        # a local lane may last, the build's and the timing's; then no verdict
        bound = wait_bound()
        deadline = None if bound is None else started + 2 * bound
        try:
            while pending:
                done, pending = self.ray.wait(pending, num_returns=1, timeout=1.0)
                if not done and cancelled():  # its caller went: nothing more runs for it
                    raise Cancelled("the caller went away while the cluster evaluated")
                if not done and deadline is not None and time.monotonic() >= deadline:
                    late = LaneBusy(f"the cluster did not answer within {2 * bound:g} s (its "
                                    "benchmark nodes were busy); no verdict on this candidate "
                                    "(the bound is twice PERFGYM_REWARD_WAIT)")
                    for ref in pending:
                        self.ray.cancel(ref, force=True)
                        i = index[ref]
                        results[i] = host_error(requests[i], late, started)
                        if on_result:
                            on_result(i, results[i])
                    pending = []
                for ref in done:
                    i = index[ref]
                    try:
                        data = self.ray.get(ref)
                    except Exception as exc:  # raised on the node, or the retries are spent
                        outcome = host_error(requests[i], exc, started)
                    else:
                        node = data.pop("node")
                        outcome = Outcome.from_dict(data)
                        outcome.config["node"] = node
                        if keys[i] and self._machines.get(node) == machine_id:
                            outcome_cache().put(keys[i], outcome)  # (a node of that kind)
                    results[i] = outcome
                    if on_result:
                        on_result(i, outcome)
        except BaseException:
            for ref in pending:  # nothing more runs for a batch nobody waits for
                self.ray.cancel(ref, force=True)
            raise
        return results  # type: ignore[return-value]
