"""A benchmark node runs as many evaluations at once as it has CPUs, as one machine without Ray
does: builds and checks side by side, each timing alone (the lane is machine-wide, so the
node needs no Ray resource to keep timings apart). When every evaluation took the node's whole
`bench_node` unit, a node of any size built and checked one candidate at a time."""
from __future__ import annotations

import threading
import time

from perfgym import EvalConfig, Status, get_task
from perfgym.executors import Request


def test_a_two_cpu_benchmark_node_runs_two_evaluations_at_once(local_ray):
    ray = local_ray
    from perfgym.executors.ray_executor import RayExecutor
    ray.init(num_cpus=2, resources={"bench_node": 1}, include_dashboard=False,
             log_to_driver=False)
    executor = RayExecutor()
    executor.bench_machine()  # the node's probe first: it takes no CPU, but a moment
    task = get_task("dgemm")
    naive = task.baseline.read_text()
    texts = [naive.replace("void matmul_optimized(", f"static const int v{i} = {i};\n"
                           "void matmul_optimized(", 1) for i in range(6)]
    config = EvalConfig(use_cache=False, max_time=0.2, max_samples=10, min_samples=3)
    outcomes: list = []
    batch = threading.Thread(target=lambda: outcomes.extend(executor.evaluate_many(
        [Request(task, t, {"M": 64, "N": 64, "K": 64}, config) for t in texts])))
    free_cpus = []
    batch.start()
    while batch.is_alive():  # the CPUs Ray has left on the node while the batch runs
        free_cpus.append(ray.available_resources().get("CPU", 0.0))
        time.sleep(0.01)
    batch.join()
    assert [o.status for o in outcomes] == [Status.OK] * len(texts)
    assert min(free_cpus) == 0.0, f"never two evaluations at once: free CPUs seen {set(free_cpus)}"
