"""One kernel at several sizes: per-size Outcomes folded into one, so a reward can use a size
set and a kernel that is right only at the training size shows at a glance."""
from __future__ import annotations

from collections import defaultdict
from typing import Callable, Sequence

from .config import EvalConfig
from .executors import Request, evaluate_many
from .metrics import geomean
from .outcome import Outcome, Status
from .tasks import Task, format_size

_ORDER = list(Status)  # worst first


def evaluate_sizes(task: Task, text: str, sizes: Sequence[dict[str, int]],
                   config: EvalConfig = EvalConfig()) -> Outcome:
    return aggregate(evaluate_many([Request(task, text, s, config) for s in sizes]))


def evaluate_folded(task: Task, items: Sequence[tuple[str, EvalConfig]],
                    sizes: Sequence[dict[str, int]] | None = None,
                    on_result: Callable[[int, Outcome], None] | None = None,
                    executor: Callable[..., list[Outcome]] = evaluate_many) -> list[Outcome]:
    """One Outcome per (answer, config): at the task's default size, or, with `sizes`, the
    folded Outcome of every size (its per-size results in `per_size`), so a search or a
    reward judges a kernel on a size set. `on_result(i, outcome)` fires as each answer's last
    size finishes."""
    per = list(sizes) if sizes else [None]
    requests = [Request(task, text, size, config) for text, config in items for size in per]
    done: dict[int, dict[int, Outcome]] = defaultdict(dict)
    folded: dict[int, Outcome] = {}

    def record(i: int, outcome: Outcome) -> None:
        item, k = divmod(i, len(per))
        done[item][k] = outcome
        if len(done[item]) == len(per):
            parts = [done[item][j] for j in range(len(per))]
            folded[item] = parts[0] if sizes is None else aggregate(parts)
            if on_result:
                on_result(item, folded[item])

    executor(requests, on_result=record)
    return [folded[i] for i in range(len(items))]


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
    disturbed = [f"{format_size(o.sizes)}: {o.disturbed}" for o in outcomes if o.disturbed]
    result.disturbed = "; ".join(disturbed) or None  # one size's timing spoils the fold's
    summary = f"{len(ok)}/{len(outcomes)} sizes OK"
    if worst.ok:
        result.gflops = _geomean_of_all([o.gflops for o in ok])
        result.gbps = _geomean_of_all([o.gbps for o in ok])
        result.speedup = _geomean_of_all([o.speedup for o in ok])
        result.fraction_of_roofline = _geomean_of_all([o.fraction_of_roofline for o in ok])
        rate = f"{result.gflops:.2f} GFLOP/s" if result.gflops else f"{result.gbps:.2f} GB/s"
        result.message = f"{summary}; geometric mean {rate}" + (
            f", {result.speedup:.2f}x naive" if result.speedup else "")
    else:
        result.message = (f"{summary}; {worst.status.value} at {format_size(worst.sizes)}: "
                          f"{worst.message}")
        result.details = worst.details
    return result


def _geomean_of_all(values: Sequence[float | None]) -> float | None:
    """metrics.geomean when every size has a positive figure, else None."""
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return geomean(values)
