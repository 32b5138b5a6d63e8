"""One kernel at several sizes: per-size Outcomes folded into one, so a reward can use a size
set and a kernel that is right only at the training size shows at a glance."""
from __future__ import annotations

import math
from typing import Sequence

from .config import EvalConfig
from .executors import Request, evaluate_many
from .outcome import Outcome, Status
from .tasks import Task, format_size

_ORDER = list(Status)  # worst first


def evaluate_sizes(task: Task, text: str, sizes: Sequence[dict[str, int]],
                   config: EvalConfig = EvalConfig()) -> Outcome:
    return aggregate(evaluate_many([Request(task, text, s, config) for s in sizes]))


def aggregate(outcomes: Sequence[Outcome]) -> Outcome:
    """The worst status across sizes; for all-OK, geometric means of the rates and speedups.
    Each size's Outcome is kept in `per_size`."""
    if not outcomes:
        raise ValueError("aggregate needs at least one outcome")
    worst = min(outcomes, key=lambda o: _ORDER.index(o.status))
    ok = [o for o in outcomes if o.ok]
    first = outcomes[0]
    result = Outcome(status=worst.status, task=first.task, sizes={}, stage=first.stage,
                     techniques=sorted({t for o in outcomes for t in o.techniques}),
                     machine=first.machine, config=first.config,
                     elapsed=sum(o.elapsed for o in outcomes),
                     per_size=[o.to_dict() for o in outcomes])
    summary = f"{len(ok)}/{len(outcomes)} sizes OK"
    if worst.ok:
        result.gflops = geomean([o.gflops for o in ok])
        result.gbps = geomean([o.gbps for o in ok])
        result.speedup = geomean([o.speedup for o in ok])
        result.fraction_of_roofline = geomean([o.fraction_of_roofline for o in ok])
        rate = f"{result.gflops:.2f} GFLOP/s" if result.gflops else f"{result.gbps:.2f} GB/s"
        result.message = f"{summary}; geometric mean {rate}" + (
            f", {result.speedup:.2f}x naive" if result.speedup else "")
    else:
        result.message = (f"{summary}; {worst.status.value} at {format_size(worst.sizes)}: "
                          f"{worst.message}")
        result.details = worst.details
    return result


def geomean(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    if not vals or len(vals) != len(values):
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))
