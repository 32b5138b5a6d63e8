"""Best-of-n: n independent samples for the task, keep the best."""
from __future__ import annotations

from dataclasses import dataclass

from ..store import Candidate
from .engine import Engine, Step
from .sqd import summary

# Under a time budget (Engine.deadline) the samples are asked for in rounds of this many, so
# the budget, not n, ends the run: the deadline stops new steps, and one round of n would be
# one step. Eight is a climb's round (two transforms, four answers each).
ROUND = 8


@dataclass
class BestOfN:
    engine: Engine
    n: int = 8
    stage: int | None = None

    def run(self) -> Candidate | None:
        steps = [Step(f"bon:{i}", 0, self.stage, None, "generate") for i in range(self.n)]
        size = ROUND if self.engine.deadline is not None else self.n
        children: list[Candidate] = []
        for start in range(0, self.n, size):
            part = steps[start:start + size]
            done = self.engine.run_steps(part)
            children += done
            if len(done) < len(part):  # the budget is spent
                break
        if 0 not in self.engine.store.done_iterations():
            self.engine.store.event("iteration_done", iteration=0, **summary(children))
        return self.engine.store.best()
