"""Where an evaluation and the confirmation disagree on one kernel at one size: both ways of
timing it, alternated, in one run.

    python benchmarks/confirm_disagreement.py TASK SIZE KERNEL.c [--draws 3]

Per draw: (a) the evaluation's way, the learning measure's settings: the kernel timed in a
run of its own against the naive kernel's time from another run (`evaluate` with the cache
off: it times the baseline afresh); (b) the confirmation's way: five interleaved rounds of
the naive kernel and the kernel at the same size (group_timing.retime_group, as
learning_confirm calls it), the median of the rounds' ratios. Each draw prints both speedups,
the kernel's median time each way and the naive kernel's in one more run of its own, so a
disagreement shows which time moved. Written for the learning run's threaded transpose at
3000 x 17 (the evaluation about 1.0x, the rounds 0.37x): it has two modes.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("size", help="e.g. N=3000,M=17")
    ap.add_argument("kernel", help="the kernel's C file")
    ap.add_argument("--draws", type=int, default=3)
    args = ap.parse_args(argv)
    from perfgym import EvalConfig, evaluate, get_task
    from perfgym.group_timing import retime_group
    from perfgym.tasks import parse_size
    try:
        task = get_task(args.task)
        size = parse_size(args.size, task)
        code = Path(args.kernel).read_text()
    except (ValueError, OSError) as exc:  # TaskError and SizeError are ValueErrors
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    # the learning measure's settings (learning_speed.MEASURE_OVERRIDES), nothing cached
    config = EvalConfig(use_cache=False, timeout=3.0, max_time=0.5)
    print(f"{task.name} at {args.size}: evaluation | rounds (kernel and naive medians, us)")
    def us(o) -> float:
        return o.timing.median * 1e6 if o.ok and o.timing else float("nan")

    for draw in range(args.draws):
        alone = evaluate(task, code, size, config)
        if not alone.ok:
            print(f"draw {draw + 1}: {alone.status.value}: {alone.message}")
            continue
        base = evaluate(task, task.baseline.read_text(), size, config)
        rounds = retime_group(task, [code], [alone], config, size=size, min_members=1)[0]
        print(f"draw {draw + 1}: {alone.speedup or 0:.2f}x (kernel {us(alone):.1f}, naive "
              f"{us(base):.1f}) | {rounds.speedup or 0:.2f}x, low {rounds.speedup_low or 0:.2f} "
              f"(kernel {us(rounds):.1f})")


if __name__ == "__main__":
    main()
