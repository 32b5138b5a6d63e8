"""Where a PyTorch candidate's evaluation time goes: each phase of one KernelBench-format
candidate on this CPU, measured, not estimated.

    python benchmarks/torch_phases.py [--task relu] [--repeats 3] [--ways fresh,batch]
                                      [--json [OUT]]

The candidate is the task's own solution (tasks/builtin_gpu/solutions), evaluated with the cache
off and a fixed 10 timed rounds, one at a time. Every
phase is timed by wrapping the function that does it for the length of the run (perfgym is
unchanged): the static checks, launching each of the four workers (problem, reference,
candidate, replayer: a sandboxed Python each), the wait until the problem worker and then the
other two have imported torch and loaded their code, the correctness trials, the kernel program
(trace and replay), the timed rounds and closing the workers. Within those, the time spent on the pipes is counted
too, split into waiting for a worker (its own work: importing, calling) and moving the bytes,
and the timed rounds are split into the workers' own call times and the rest. On a CPU a
candidate faster than the reference is timed in up to three sessions (protocol.CPU_REPLICATES),
each with fresh workers: the phases add up over them.

Two ways: `fresh`, each evaluation alone (every worker started for it), and `batch`, the
evaluations inside one batch of the local executor (backends/torch/warm.py), after one
evaluation that starts the batch's warm pair and template and is not counted: what a
candidate costs within a batch (`seconds_per_candidate`).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from phase_timer import Phases, owner_of, patcher, wrap_each  # noqa: E402
from results_by_machine import json_flag, record  # noqa: E402

SAMPLES = 10

# (the module, or a class in it; the attribute; the phase)
WRAPPED = [
    ("perfgym.backends.torch", "check_statically", "static checks (AST audit)"),
    ("perfgym.backends.torch.channel.Worker", "__init__", "worker launch (4 per session)"),
    ("perfgym.backends.torch.session.Session", "problem_ready",
     "problem worker: start, import torch, build the model"),
    ("perfgym.backends.torch.session.Session", "ready",
     "reference and candidate workers: start, import torch, load"),
    ("perfgym.backends.torch.session.Session", "correctness", "correctness trials"),
    ("perfgym.backends.torch.session.Session", "kernel_program",
     "kernel program: trace, replay, check against the reference"),
    ("perfgym.backends.torch.session.Session", "replay_seconds",
     "kernel program: timed replays (the floor on the candidate's time)"),
    ("perfgym.backends.torch.protocol", "_replayer_ready", "replayer worker: start, import torch"),
    ("perfgym.backends.torch.channel.Worker", "close", "closing the workers"),
]
# counted wherever they happen (inside the phases above)
PIPE = [("perfgym.backends.torch.channel.Worker", "_write", "pipe reads and writes"),
        ("perfgym.backends.torch.channel.Worker", "_read_into", "pipe reads and writes"),
        # split below: the waits in them, and the rest
        ("perfgym.backends.torch.channel.Worker", "_wait",
         "within them: waiting on a pipe for a worker (its own work)")]
PIPE_LABEL, WAIT_LABEL = PIPE[0][2], PIPE[2][2]
MOVE_LABEL = "within them: moving bytes over the pipes"
TIMED = "timed rounds"
CALLS = "within the timed rounds: the calls themselves (both workers' clocks)"


def timed_rounds(fn, phases):
    """Session.time, adding up the calls' own seconds (charged, both models) of each session."""
    def timed(*args, **kwargs):
        result = fn(*args, **kwargs)
        with phases.lock:
            phases.seconds[CALLS] += sum(result.new) + sum(result.ref)
        return result
    return timed


@contextmanager
def recording(phases: Phases):
    with ExitStack() as undo:
        patch = patcher(undo)
        wrap_each(phases, patch, WRAPPED)
        session = owner_of("perfgym.backends.torch.session.Session")
        patch(session, "time", phases.wrap(timed_rounds(session.time, phases), TIMED))
        wrap_each(phases, patch, PIPE, nested=True)
        yield


def breakdown(task, code: str, config) -> tuple[dict[str, float], float, object]:
    from perfgym import evaluate
    phases = Phases()
    with recording(phases):
        start = time.perf_counter()
        outcome = evaluate(task, code, None, config)
        total = time.perf_counter() - start
    seconds = dict(phases.seconds)
    seconds[MOVE_LABEL] = max(seconds.pop(PIPE_LABEL, 0.0) - seconds.get(WAIT_LABEL, 0.0), 0.0)
    outside = sum(v for k, v in seconds.items() if not k.startswith("within"))
    seconds["other (verdict, cleanup, sessions' bookkeeping)"] = max(total - outside, 0.0)
    return seconds, total, outcome


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="relu", help="a built-in PyTorch task")
    ap.add_argument("--repeats", type=int, default=3, help="evaluations (medians)")
    ap.add_argument("--ways", default="fresh,batch", help="fresh, batch or both")
    json_flag(ap, "torch_phases")
    args = ap.parse_args()

    from perfgym import EvalConfig, get_task
    task = get_task(args.task)
    if getattr(task, "expert", None) is None or task.language != "torch":
        sys.exit(f"{args.task}: not a built-in PyTorch task with a solution (relu, softmax, ...)")
    code = task.expert.read_text()
    config = EvalConfig(use_cache=False, device="cpu", min_samples=SAMPLES,
                        max_samples=SAMPLES, max_time=60, median_precision=0.0)
    result = {"task": args.task, "repeats": args.repeats, "timed_rounds": SAMPLES}
    for way in args.ways.split(","):
        figures = measure(task, code, config, args.repeats, way)
        result[way] = figures
        print(f"{args.task} (PyTorch on the CPU), {way}: {figures['total_s']:.2f} s per "
              f"evaluation, median of {args.repeats}")
        for label, s in sorted(figures["phases_s"].items(), key=lambda kv: -kv[1]):
            print(f"  {s:7.3f} s  {s / figures['total_s']:6.1%}  {label}")
    if "batch" in result:
        result["seconds_per_candidate"] = result["batch"]["total_s"]
    if args.json:
        record("torch_phases", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    ways = {"fresh": "alone", "batch": "in a batch"}
    return {f"{result['task']}, {label}": f"{result[way]['total_s']:.2f} s"
            for way, label in ways.items() if way in result}


def measure(task, code, config, repeats: int, way: str) -> dict:
    from contextlib import nullcontext

    from perfgym.backends.torch import warm
    runs, totals = [], []
    with warm.batch() if way == "batch" else nullcontext():
        if way == "batch":
            breakdown(task, code, config)  # starts the pair and the template: not counted
        for i in range(repeats):
            seconds, total, o = breakdown(task, code, config)
            if not o.ok:
                sys.exit(f"the solution did not pass: {o.status.value} {o.message}")
            runs.append(seconds)
            totals.append(total)
            print(f"{way} evaluation {i + 1}: {total:.2f} s", file=sys.stderr)
    labels = list(dict.fromkeys(k for r in runs for k in r))
    return {"total_s": statistics.median(totals),
            "phases_s": {k: statistics.median(r.get(k, 0.0) for r in runs) for k in labels}}


if __name__ == "__main__":
    main()
