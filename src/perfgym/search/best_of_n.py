"""Best-of-n: n independent samples for the task, keep the best."""
from __future__ import annotations

from dataclasses import dataclass

from ..store import Candidate
from .engine import Engine, Step
from .sqd import summary


@dataclass
class BestOfN:
    engine: Engine
    n: int = 8
    stage: int | None = None

    def run(self) -> Candidate | None:
        steps = [Step(f"bon:{i}", 0, self.stage, None, "generate") for i in range(self.n)]
        children = self.engine.run_steps(steps)
        if 0 not in self.engine.store.done_iterations():
            self.engine.store.event("iteration_done", iteration=0, **summary(children))
        return self.engine.store.best()
