"""The result of a search: its fastest kernel that is also right at the task's train sizes.

A search judges its answers at one size, so its fastest kernel may hold at that size alone: a
no-flag SQD search on dgemm-256 found a kernel 29.6x the naive one whose row blocks of 16 ran
past the arrays at any other size (SIGSEGV at two of the three held-out sizes). What a search
hands a user is the fastest kernel that also passes the task's train sizes (odd, prime and
non-multiple sizes: the task's own set for choosing among kernels), checked fastest first, at
most LIMIT of them. When none passes, the result is the seed (the naive kernel, right at
every size), or no kernel where the search has no seed (best-of-n, refine). The held-out
sizes stay unseen until search.heldout judges the result.
"""
from __future__ import annotations

from ..store import Candidate
from .engine import Engine

LIMIT = 32  # kernels checked at most (a crash costs a fraction of a second, a pass seconds)


def general_best(engine: Engine, best: Candidate | None) -> Candidate | None:
    """`best` when it passes the train sizes (or there are none to check: one size set, a
    PyTorch task, a search judged on a size set already); else the fastest that does, else the
    seed. Stores a "general_best" event with every check when one was made."""
    task, store = engine.task, engine.store
    if best is None or best.op == "seed" or engine.sizes is not None:
        return best
    train = [s for s in task.sizes("train") if s != task.default_size]
    if not train:
        return best
    from ..multisize import evaluate_folded
    fastest_first = sorted((c for c in store.candidates()
                            if c.ok and not c.copied and c.op != "seed"),
                           key=lambda c: (-c.rate, c.id))
    checked: list[dict] = []
    seen: set[str] = set()
    chosen = None
    for c in fastest_first:
        if c.completion in seen:  # the same text again: judged already
            continue
        seen.add(c.completion)
        o = evaluate_folded(task, [(c.completion, engine.eval_config.replace(stage=c.stage))],
                            train, executor=engine.executor)[0]
        checked.append({"candidate": c.id, "status": o.status.value, "message": o.message})
        if o.ok:
            chosen = c
            break
        if len(checked) == LIMIT:
            break
    if chosen is None:  # the seed where the search has one (SQD, evolve), else nothing
        chosen = next((c for c in store.candidates() if c.op == "seed"), None)
    store.event("general_best", chosen=chosen.id if chosen else None, fastest=best.id,
                checked=checked)
    return chosen


def passed_over(store) -> list[dict]:
    """The checks of the last general_best event that failed: the kernels faster than the
    result that were not right at the train sizes."""
    rows: list[dict] = []
    for _, _, data in store.events("general_best"):
        rows = [r for r in data["checked"] if r["status"] != "OK"]
    return rows


def search_result(store) -> Candidate | None:
    """What a finished search found: the kernel general_best chose (the seed when none of the
    fastest held at the train sizes), else (a run from before the check) the fastest."""
    events = list(store.events("general_best"))
    if not events:
        return store.best()
    chosen = events[-1][2]["chosen"]
    return store.get(chosen) if chosen is not None else None
