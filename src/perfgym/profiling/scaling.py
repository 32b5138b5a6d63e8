"""Thread scaling: the kernel timed again on one thread, against the timing at all threads
(the survey's efficiency@k). Costs a second timed run, so it runs only when asked."""
from __future__ import annotations

NAME = "scaling"


def unavailable(ctx) -> str | None:
    if not ctx.outcome.ok or ctx.outcome.timing is None:
        return f"no timing ({ctx.outcome.status.value})"
    if ctx.config.n_threads < 2:
        return "the kernel ran on one thread (--threads 1, or one core)"
    return None


def run(ctx) -> list[str]:
    n, many = ctx.config.n_threads, ctx.outcome.timing.median
    if "openmp" not in ctx.outcome.techniques:
        return [f"single-threaded (no OpenMP): {n - 1} of {n} cores idle"]
    if ctx.evaluate is None:
        return ["not measured: no evaluator was handed to the profiler"]
    one = ctx.evaluate(ctx.task, ctx.code, ctx.size,
                   ctx.config.replace(threads=1, profile=(), compare_baseline=False))
    if not one.ok or one.timing is None:
        return [f"on one thread the kernel did not run cleanly: {one.status.value} "
                f"{one.message}"[:160]]
    speedup = one.timing.median / many
    # (4 significant digits: a 0.03 ms kernel at 3 decimals would show a ratio 2% off)
    lines = [f"1 thread {one.timing.median * 1e3:.4g} ms, {n} threads {many * 1e3:.4g} ms: "
             f"{speedup:.2f}x, parallel efficiency {speedup / n * 100:.0f}%"]
    if speedup / n < 0.6:
        lines.append("poor scaling: too little work per thread, a serial part, load imbalance "
                     "or memory bandwidth shared by the threads")
    return lines
