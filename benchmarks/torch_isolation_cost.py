"""What the trust model costs per PyTorch candidate, measured in one run: the old in-process
protocol (reference, candidate and timer in one sandboxed process; outputs through files) against
perfgym's two-worker protocol (reference and candidate in separate sandboxed processes, inputs
and outputs over the parent's pipes, every timed output checked, parent-clock cross-check).
Both paths use the same trials, warm-ups and sample counts; the wall time of a whole evaluation
is what a search or a GRPO step waits for.

    python benchmarks/torch_isolation_cost.py [--repeats 3] [--tasks relu,softmax]
"""
import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

import numpy as np

from perfgym import EvalConfig, evaluate, get_task, sandbox
from perfgym.backends.torch.protocol import worker_env, worker_limits
from perfgym.sandbox_python import sandbox_python

OLD_WORKER = Path(__file__).with_name("inprocess_torch_worker.py")
SAMPLES = 10


def old_path(task, code: str, config: EvalConfig) -> float:
    """One evaluation the old way; returns its wall seconds (and checks it passed)."""
    started = time.monotonic()
    workdir = sandbox.make_workdir("perfgym-bench-")
    try:
        (workdir / "problem.py").write_text(task.source)
        (workdir / "candidate.py").write_text(code)
        shutil.copy(OLD_WORKER, workdir / "torch_worker.py")
        (workdir / "manifest.json").write_text(json.dumps({
            "device": "cpu", "trials": config.trials, "seed": 1234, "kernels": [],
            "flush_bytes": 0, "timing": {"warmup": 1, "min_samples": SAMPLES,
                                         "max_samples": SAMPLES, "max_time": 60,
                                         "cv_target": 0.0}}))
        py = sandbox_python()
        r = sandbox.run([py.executable, "torch_worker.py", "manifest.json"], workdir,
                        worker_limits(config), env=worker_env(config, workdir, "cpu"),
                        expose=py.expose)
        report = json.loads((workdir / "result.json").read_text())
        assert r.ok and "error" not in report, (r.stderr[-500:], report.get("error"))
        for k, trial in enumerate(report["trials"]):  # the parent's comparison, as it was
            for i in range(len(trial["new"])):
                got, want = (np.load(workdir / f"{w}{k}_{i}.npy") for w in ("new", "ref"))
                assert np.allclose(got, want, rtol=1e-4, atol=1e-4)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return time.monotonic() - started


def new_path(task, code: str, config: EvalConfig) -> float:
    started = time.monotonic()
    o = evaluate(task, code, None, config)
    assert o.ok, o.message
    assert len(o.timing.samples) == SAMPLES
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", default="relu,softmax,scale_bias_gelu")
    args = parser.parse_args()
    config = EvalConfig(use_cache=False, trials=3, min_samples=SAMPLES, max_samples=SAMPLES,
                        max_time=60, median_precision=0.0)
    print(f"{'task':18} {'in-process s':>13} {'isolated s':>11} {'ratio':>6}   "
          f"(median of {args.repeats}, {config.trials} trials + {SAMPLES} timed calls each)")
    ratios = []
    for name in args.tasks.split(","):
        task = get_task(name)
        code = task.expert.read_text()
        old, new = [], []
        for _ in range(args.repeats):  # interleaved, so drift hits both alike
            old.append(old_path(task, code, config))
            new.append(new_path(task, code, config))
        o, n = statistics.median(old), statistics.median(new)
        ratios.append(n / o)
        print(f"{name:18} {o:13.2f} {n:11.2f} {n / o:6.2f}")
    print(f"isolation costs {statistics.median(ratios):.2f}x the in-process wall time per "
          "candidate (median over tasks)")


if __name__ == "__main__":
    main()
