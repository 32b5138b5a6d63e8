"""What warm problem and reference workers, and workers forked from a template, save a batch
of PyTorch candidates.

    python benchmarks/torch_batch.py [--task relu] [--candidates 8] [--repeats 3] [--json [OUT]]

A batch of `--candidates` answers (the task's expert kernel and a copy of its reference,
alternating) is evaluated by the local executor four ways per repeat, the order rotating:
  warm         the default: the batch's problem and reference workers kept alive
               (backends/torch/warm.py), each candidate's and replayer's worker forked from
               the batch's template that has imported torch, and each of the replayer's
               kernel checks forked from the template that has imported Triton's front end
               (backends/torch/template.py; as root only)
  own_checks   as warm, but the replayer starts each kernel check as a process of its own
  pair         the warm pair, every other worker and check started fresh (no template)
  fresh        every worker started fresh
Prints the wall seconds per candidate each way, the ratios, and how many workers each way
started (and how many workers and checks were forked); every verdict of the ways must agree.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import nullcontext

from results_by_machine import json_flag, record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="relu")
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    json_flag(ap, "torch_batch")
    args = ap.parse_args()
    from perfgym import EvalConfig, get_task
    from perfgym.backends.torch import protocol
    from perfgym.backends.torch import template, warm
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
    forked: list[str] = []
    fork = template.Template._fork

    def counted_fork(self, request, fds):
        pid = fork(self, request, fds)
        forked.append(request["role"])
        return pid
    template.Template._fork = counted_fork
    pooled, with_template = local.torch_batch, warm.Pool.template

    def templates_for(way):
        def template(self, env, python, kind="workers"):
            if way == "warm" or (way == "own_checks" and kind == "workers"):
                return with_template(self, env, python, kind)
            return None
        return template
    ways = ("warm", "own_checks", "pair", "fresh")
    per = {w: [] for w in ways}
    starts = {w: 0 for w in ways}
    forks = {w: 0 for w in ways}
    checks = {w: 0 for w in ways}
    verdicts = {w: [] for w in ways}
    for r in range(args.repeats):
        for way in ways[r % len(ways):] + ways[:r % len(ways)]:
            local.torch_batch = nullcontext if way == "fresh" else pooled
            warm.Pool.template = templates_for(way)
            roles.clear()
            forked.clear()
            t0 = time.monotonic()
            outs = local.evaluate_many(batch)
            per[way].append((time.monotonic() - t0) / len(batch))
            starts[way] += len(roles)
            forks[way] += sum(role != "check" for role in forked)
            checks[way] += forked.count("check")
            verdicts[way].append([o.status.value for o in outs])
            print(f"repeat {r + 1} {way:10s} {per[way][-1]:.2f} s per candidate, "
                  f"{len(roles)} workers started, {sum(role != 'check' for role in forked)} "
                  f"of them forked, {forked.count('check')} checks forked", flush=True)
    local.torch_batch, warm.Pool.template = pooled, with_template
    assert all(verdicts[w] == verdicts["fresh"] for w in ways), verdicts
    median = {k: statistics.median(v) for k, v in per.items()}
    result = {"machine": cpu_model(), "task": args.task, "candidates": args.candidates,
              "repeats": args.repeats, "seconds_per_candidate": median,
              "all_seconds_per_candidate": per,
              "workers_started_per_batch": {k: v / args.repeats for k, v in starts.items()},
              "workers_forked_per_batch": {k: v / args.repeats for k, v in forks.items()},
              "checks_forked_per_batch": {k: v / args.repeats for k, v in checks.items()},
              "verdicts": verdicts["warm"][0],
              "ratio_warm_over_fresh": median["warm"] / median["fresh"],
              "ratio_warm_over_own_checks": median["warm"] / median["own_checks"],
              "ratio_pair_over_fresh": median["pair"] / median["fresh"]}
    print(json.dumps(result, indent=1))
    if args.json:
        record("torch_batch", result, summary(result), args.json)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    per = result["seconds_per_candidate"]
    out = {f"s a candidate, {way}": f"{s:.2f}" for way, s in per.items()}
    out["warm / fresh"] = f"{result['ratio_warm_over_fresh']:.2f}x"
    return out


if __name__ == "__main__":
    main()
