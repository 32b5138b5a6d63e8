"""The live SQD pool that online GRPO draws its prompts from (experiment 2 of
"Improving HPC Code Generation Capability of LLMs via Online RL with Real-Machine Benchmark Rewards").

TRL's batches have a fixed size: each step takes `groups` nodes. The pool hands out the nodes
of the current iteration's plan (seed + top/middle/error selections, exactly as
search.sqd plans them); when a step needs more nodes than remain, it cycles through the plan
again (extra children for the same nodes, still iteration t). At the first rollout after every
node was handed out and every child scored, the iteration ends: the pool becomes those children
and the next plan is made from them. The pool lives in one process and is the only writer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..search.engine import Engine, Step
from ..search.sqd import SQD, SQDConfig
from ..store import Candidate


@dataclass
class Node:
    """One prompt of a step: expand `parent` by `op` into children at `stage`."""

    iteration: int
    parent: Candidate
    op: str
    stage: int
    round: int  # > 0 when the plan was cycled to fill a step

    def slot(self, g: int) -> str:
        return (f"grpo:{self.iteration}:{self.parent.id}:{self.op}:{self.stage}:"
                f"{self.round}:{g}")


@dataclass
class LivePool:
    engine: Engine  # store, task, evaluation config (the seed is benchmarked through it)
    config: SQDConfig = field(default_factory=SQDConfig)
    G: int = 8
    iteration: int = 1
    plan: list[Node] = field(default_factory=list)
    cursor: int = 0
    dispatched: list[str] = field(default_factory=list)  # slots handed out this iteration

    def __post_init__(self) -> None:
        self._sqd = SQD(self.engine, self.config)
        self.seed = self._sqd._seed()
        self._resume()

    def _resume(self) -> None:
        """Continue after the last iteration whose children are all stored (a restart)."""
        store = self.engine.store
        self.iteration = max(store.done_iterations("pool_iteration_done"), default=0) + 1
        self._make_plan()
        # nodes are handed out in plan order, so the stored children say how far it got
        stored = [c.slot for c in store.candidates(self.iteration) if c.slot.startswith("grpo:")]
        self.cursor = len(stored) // self.G
        self.dispatched = stored[: self.cursor * self.G]

    def _make_plan(self) -> None:
        pool = self._sqd.pool(self.iteration - 1, self.seed)
        steps = self._sqd.plan(self.iteration, self.seed, pool)
        seen, self.plan = set(), []
        for s in steps:  # one Node per (parent, op, stage); the plan's G children become slots
            key = (s.parent.id, s.op, s.stage)
            if key not in seen:
                seen.add(key)
                self.plan.append(Node(self.iteration, s.parent, s.op, s.stage, 0))
        self.cursor, self.dispatched = 0, []

    def next_nodes(self, k: int) -> list[Node]:
        store = self.engine.store
        if self.cursor >= len(self.plan) and all(
                (c := store.by_slot(s)) is not None and not c.pending for s in self.dispatched):
            store.event("pool_iteration_done", iteration=self.iteration,
                        children=len(self.dispatched))
            self.iteration += 1
            self._make_plan()
        nodes = []
        while len(nodes) < k:
            i = self.cursor
            base = self.plan[i % len(self.plan)]
            node = Node(base.iteration, base.parent, base.op, base.stage, i // len(self.plan))
            nodes.append(node)
            self.dispatched += [node.slot(g) for g in range(self.G)]
            self.cursor += 1
        return nodes

    def prompt(self, node: Node) -> str:
        return self.engine.prompt(Step(node.slot(0), node.iteration, node.stage, node.parent,
                                       node.op))
