"""Staged Quality-Diversity search (Fig. 1 of
"Improving HPC Code Generation Capability of LLMs via Online RL with Real-Machine Benchmark Rewards").

    Pool(0) = {stage 1: {seed}}
    for t = 1..T:
        P = {seed}                                   (expanded by "improve" at the first stage)
        for each stage s in Pool(t-1):
            top 40% by GFLOP/s   -> deepen: children at stage s+1
            middle 30%           -> improve: children at stage s
            30% that failed      -> repair: children at stage s
        Pool(t) = {}                                 (reset every iteration)
        G children per node in P; benchmark them; Pool(t)[child's stage] += child
        on_iteration(t, children)                    (where GRPO updates the policy)

The ratios, G, the stages and T are configurable. Every step is a slot in the run store, so a
killed search resumes where it stopped.

Restarts: with `restarts` R > 1 the T iterations run again from the seed, up to R times
(iterations T+1..2T, ...), each a new draw of the sampler, and the best of all is the result.
One search's best is a draw with a wide spread (on dgemm the coder's ranged from 1.00x to
4.75x over seeds), and the pools grow G-fold each iteration, so a second draw costs far less
than a fourth iteration. With `budget_seconds`, a restart starts only when the time spent so
far plus the longest restart yet still fits the budget, and an iteration runs only the children
that fit the time left at the slowest time per answer yet: a budget is a budget, whatever
iteration is running (a draw's last iteration is its largest: on dgemm one began with 160 s of
12 minutes left, took 261 s and ended 101 s past the budget).
"""
from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from ..backends import backend_for
from ..outcome import Status
from ..store import Candidate
from .engine import Engine, Step

_STATUS_RANK = {s.value: i for i, s in enumerate(Status)}  # worst first


@dataclass
class SQDConfig:
    iterations: int = 3
    G: int = 4  # children per node
    ratios: tuple[float, float, float] = (0.4, 0.3, 0.3)  # top (deepen), middle, errors
    stages: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    seed_code: str | None = None  # default: the task's naive kernel
    restarts: int = 1  # runs of the T iterations from the seed (see the module's docstring)
    budget_seconds: float | None = None  # no restart past this (None: all of them)

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.G < 1 or self.restarts < 1:
            raise ValueError("iterations, G and restarts must be at least 1")
        if len(self.ratios) != 3 or any(r < 0 for r in self.ratios) or sum(self.ratios) > 1.0001:
            raise ValueError("ratios are three non-negative shares (top, middle, errors) "
                             "summing to at most 1")
        if not self.stages or any(s not in range(1, 7) for s in self.stages):
            raise ValueError("stages must be among 1-6")


def select(nodes: list[Candidate], ratios: tuple[float, float, float]
           ) -> tuple[list[Candidate], list[Candidate], list[Candidate]]:
    """(top, middle, errors) of one stage's pool. Working kernels are ranked by their rate
    (Candidate.rate: GFLOP/s, else GB/s); failed ones by how far they got (a wrong answer is
    closer to working than a compile error)."""
    n = len(nodes)
    # a copy of a memory kernel (Candidate.copied) is no node: what grows from it is not the
    # model's own
    ok = sorted((c for c in nodes if c.ok and not c.copied),
                key=lambda c: (-c.rate, c.id))
    bad = sorted((c for c in nodes if not c.ok),
                 key=lambda c: (-_STATUS_RANK.get(c.status or "", 0), c.id))
    n_top = max(1, math.floor(ratios[0] * n + 0.5)) if ok and ratios[0] > 0 else 0
    n_mid = math.floor(ratios[1] * n + 0.5)
    n_err = max(1, math.floor(ratios[2] * n + 0.5)) if bad and ratios[2] > 0 else 0
    return ok[:n_top], ok[n_top:n_top + n_mid], bad[:n_err]


@dataclass
class SQD:
    engine: Engine
    config: SQDConfig = field(default_factory=SQDConfig)
    on_iteration: Callable[[int, list[Candidate]], None] | None = None
    clock: Callable[[], float] = time.time  # the budget's clock (a test moves its own)

    def run(self) -> Candidate | None:
        store = self.engine.store
        if not any(store.events("sqd_started")):  # (a resumed run keeps its first start)
            store.event("sqd_started", at=self.clock())
        seed = self._seed()
        done = store.done_iterations()
        T = self.config.iterations
        stopped = {d["restarts"] for _, _, d in store.events("restarts_stopped")}
        for r in range(self.config.restarts):
            first = r * T + 1
            if r > 0 and not set(range(first, first + T)) & (done | self._planned()):
                # a restart not begun yet: only if the budget has room for it (once decided,
                # a resumed run keeps the decision)
                if r in stopped or not self._time_for_another():
                    if r not in stopped:
                        store.event("restarts_stopped", restarts=r,
                                    budget=self.config.budget_seconds)
                    break
                if r + 1 not in self._restart_times():
                    store.event("restart", restart=r + 1, first_iteration=first,
                                at=self.clock())
            for t in range(first, first + T):
                if t in done:
                    continue
                pool = {self.config.stages[0]: [seed]} if t == first else self.pool(t - 1, seed)
                steps = self._fit(self.plan(t, seed, pool))
                if not steps:  # the budget is spent: later iterations fit no better
                    store.event("budget_spent", iteration=t, budget=self.config.budget_seconds)
                    return store.best()
                children = self.engine.run_steps(steps)
                store.event("iteration_done", iteration=t, restart=r + 1, at=self.clock(),
                            **summary(children))
                if self.on_iteration:
                    self.on_iteration(t, children)
        return store.best()

    def _planned(self) -> set[int]:
        """Iterations with a candidate in the store (one begun and killed counts as started)."""
        return {c.iteration for c in self.engine.store.candidates() if c.iteration > 0}

    def _time_for_another(self) -> bool:
        """Whether the time spent so far plus the longest restart yet fits the budget."""
        budget = self.config.budget_seconds
        if budget is None:
            return True
        starts = self._restart_times()
        ends = {d["iteration"]: d.get("at", ts)
                for ts, _, d in self.engine.store.events("iteration_done")}
        T = self.config.iterations
        longest = max((ends[k * T] - start for k, start in starts.items() if k * T in ends),
                      default=0.0)
        return self.clock() - starts[1] + longest <= budget

    def _restart_times(self) -> dict[int, float]:
        """When each restart began (1: the search itself)."""
        store = self.engine.store
        times = {1: next(d.get("at", ts) for ts, _, d in store.events("sqd_started"))}
        for ts, _, d in store.events("restart"):
            times.setdefault(d["restart"], d.get("at", ts))
        return times

    def _fit(self, steps: list[Step]) -> list[Step]:
        """The steps that fit the budget: the ones already in the store (a resumed run keeps
        them), and of the rest as many as the time left holds at the slowest time per answer
        yet, one child per node before any node's second (all of them before an iteration
        has ended: nothing to go by)."""
        per_answer = self._seconds_per_answer()
        if self.config.budget_seconds is None or per_answer is None:
            return steps
        left = self.config.budget_seconds - (self.clock() - self._restart_times()[1])
        store = self.engine.store
        new = [i for i, s in enumerate(steps) if store.by_slot(s.slot) is None]
        fits = max(0, int(left // per_answer))
        # slots end in the child's number g: g = 0 of every node first, then g = 1, ...
        new.sort(key=lambda i: (int(steps[i].slot.rsplit(":", 1)[1]), i))
        cut = set(new[fits:])
        return [s for i, s in enumerate(steps) if i not in cut]

    def _seconds_per_answer(self) -> float | None:
        """The slowest time per child of the iterations run yet, each timed from the end of
        the one before (or its restart's start), the model's answers and their judging both."""
        marks = ("sqd_started", "restart", "iteration_done")
        last, slowest = None, None
        for ts, kind, d in self.engine.store.events():
            if kind not in marks:
                continue
            at = d.get("at", ts)
            if kind == "iteration_done" and last is not None and d.get("children"):
                per = (at - last) / d["children"]
                slowest = per if slowest is None else max(slowest, per)
            last = at
        return slowest

    def _seed(self) -> Candidate:
        store = self.engine.store
        first = self.config.stages[0]
        code = self.config.seed_code or self.engine.task.baseline.read_text()
        step = Step("sqd:0:seed", 0, first, None, "seed")
        if store.by_slot(step.slot) is None:
            store.add_pending(step.slot, 0, first, None, "seed", "seed", None, code)
        # the seed is benchmarked like any child; its reward group is itself
        return self.engine.run_steps([step])[0]

    def pool(self, iteration: int, seed: Candidate) -> dict[int, list[Candidate]]:
        if iteration == 0:
            return {self.config.stages[0]: [seed]}
        pool: dict[int, list[Candidate]] = defaultdict(list)
        for c in self.engine.store.candidates(iteration):
            pool[c.stage].append(c)
        return dict(pool)

    def plan(self, t: int, seed: Candidate, pool: dict[int, list[Candidate]]) -> list[Step]:
        stages = self.config.stages
        seed_op = backend_for(self.engine.task).seed_op
        nodes: list[tuple[Candidate, str, int]] = [(seed, seed_op, stages[0])]
        for s in sorted(pool):
            top, mid, err = select(pool[s], self.config.ratios)
            i = stages.index(s) if s in stages else len(stages) - 1
            nxt = stages[min(i + 1, len(stages) - 1)]
            nodes += [(c, "deepen" if nxt != s else "improve", nxt) for c in top]
            nodes += [(c, "improve", s) for c in mid]
            nodes += [(c, "repair", s) for c in err]
        # with one stage the seed is both P's node and the first pool's top node, with the
        # same op and stage: it is expanded once (its slots would repeat)
        unique = list({(parent.id, op, stage): (parent, op, stage)
                       for parent, op, stage in nodes}.values())
        return [Step(f"sqd:{t}:{parent.id}:{op}:{stage}:{g}", t, stage, parent, op)
                for parent, op, stage in unique for g in range(self.config.G)]


def summary(children: list[Candidate]) -> dict:
    statuses: dict[str, int] = defaultdict(int)
    for c in children:
        statuses[c.status] += 1
    rewards = [c.reward for c in children if c.reward is not None]
    rates = [c.gflops for c in children if c.ok and c.gflops]
    return {"children": len(children), "statuses": dict(statuses),
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,
            "max_gflops": max(rates) if rates else None}
