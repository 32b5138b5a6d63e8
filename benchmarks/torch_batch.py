"""What warm problem and reference workers save a batch of PyTorch candidates.

    python benchmarks/torch_batch.py [--task relu] [--candidates 8] [--repeats 3] [--json OUT]

A batch of `--candidates` answers (the task's expert kernel and a copy of its reference,
alternating) is evaluated by the local executor twice per repeat, in alternating order: with
the batch's problem and reference workers kept alive (backends/torch/warm.py, the default) and
with three fresh workers per candidate. Prints the wall seconds per candidate each way, their
ratio, and how many workers each way started; every verdict of the two ways must agree.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import nullcontext
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="relu")
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from perfgym import EvalConfig, get_task
    from perfgym.backends.torch import protocol
    from perfgym.backends.torch.channel import Worker
    from perfgym.executors import local
    from perfgym.machine import cpu_model
    from perfgym.tasks.selfcheck import reference_as_candidate
    task = get_task(args.task)
    texts = [task.expert.read_text(), reference_as_candidate(task.source)]
    config = EvalConfig(use_cache=False)
    batch = [local.Request(task, texts[i % 2], config=config if i % 2 == 0 else
                           config.replace(require_custom_kernel=False))
             for i in range(args.candidates)]
    roles: list[str] = []

    class Counted(Worker):
        def __init__(self, role, *a, **k):
            roles.append(role)
            super().__init__(role, *a, **k)
    protocol.Worker = Counted
    pooled = local.torch_batch
    per = {"warm": [], "fresh": []}
    starts = {"warm": 0, "fresh": 0}
    verdicts = {"warm": [], "fresh": []}
    for r in range(args.repeats):
        for way in (("warm", "fresh") if r % 2 == 0 else ("fresh", "warm")):
            local.torch_batch = pooled if way == "warm" else nullcontext
            roles.clear()
            t0 = time.monotonic()
            outs = local.evaluate_many(batch)
            per[way].append((time.monotonic() - t0) / len(batch))
            starts[way] += len(roles)
            verdicts[way].append([o.status.value for o in outs])
            print(f"repeat {r + 1} {way:5s} {per[way][-1]:.2f} s per candidate, "
                  f"{len(roles)} workers started", flush=True)
    local.torch_batch = pooled
    assert verdicts["warm"] == verdicts["fresh"], verdicts
    result = {"machine": cpu_model(), "task": args.task, "candidates": args.candidates,
              "repeats": args.repeats,
              "seconds_per_candidate": {k: statistics.median(v) for k, v in per.items()},
              "all_seconds_per_candidate": per,
              "workers_started_per_batch": {k: v / args.repeats for k, v in starts.items()},
              "ratio_warm_over_fresh": statistics.median(per["warm"]) /
              statistics.median(per["fresh"])}
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
