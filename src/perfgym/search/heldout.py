"""The end of a search: its best kernels judged on the task's held-out sizes, which no search
step saw (robustness across shapes: a kernel tuned to one size that breaks at an odd one shows
here, not in the reward). The result is a "heldout" event the report turns into a table."""
from __future__ import annotations

from ..store import Candidate, RunStore
from .engine import Engine


def best_kernels(store: RunStore, best: Candidate | None) -> list[Candidate]:
    """The search's result (search.general), and each evolve island's best when there are
    islands."""
    chosen = [best] if best is not None and best.op != "seed" else []
    for _, _, data in store.events("archive"):
        for island in data.get("islands", []):
            ids = [cid for cid in island.values()]
            top = max((store.get(i) for i in ids), key=lambda c: c.rate, default=None)
            if top is not None and all(top.id != c.id for c in chosen):
                chosen.append(top)
    return chosen


def judge_heldout(engine: Engine, best: Candidate | None) -> list[dict]:
    """Evaluate the search's result (and the islands' bests) at every held-out size; store
    and return one row each."""
    task, store = engine.task, engine.store
    sizes = task.sizes("heldout") if hasattr(task, "sizes") else []
    kernels = best_kernels(store, best)
    if not sizes or not kernels:
        return []
    from ..multisize import evaluate_folded
    outcomes = evaluate_folded(task, [(c.completion, engine.eval_config) for c in kernels],
                               sizes, executor=engine.executor)
    rows = [{"candidate": c.id, "status": o.status.value, "message": o.message,
             "speedup": o.speedup,  # the geometric mean over the held-out sizes
             "per_size": [{"sizes": p["sizes"], "status": p["status"],
                           "gflops": p.get("gflops"), "speedup": p.get("speedup")}
                          for p in o.per_size]}
            for c, o in zip(kernels, outcomes)]
    store.event("heldout", rows=rows)
    return rows
