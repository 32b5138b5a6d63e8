"""Generate-evaluate-refine (section 4.1 of
"Towards Automated Kernel Generation in the Era of LLMs: A Survey"): each chain writes a
kernel, sees its measured outcome, and writes the next version (repair when it failed, improve when it worked),
for a number of turns. The best kernel of all chains wins."""
from __future__ import annotations

from dataclasses import dataclass

from ..store import Candidate
from .engine import Engine, Step
from .sqd import summary


@dataclass
class Refine:
    engine: Engine
    turns: int = 4
    chains: int = 1
    stage: int | None = None

    def run(self) -> Candidate | None:
        previous: list[Candidate | None] = [None] * self.chains
        for turn in range(self.turns):
            steps = []
            for chain, parent in enumerate(previous):
                if parent is not None and parent.copied:  # a memory kernel: start over
                    parent = None
                op = "generate" if parent is None else ("improve" if parent.ok else "repair")
                steps.append(Step(f"refine:{chain}:{turn}", turn, self.stage, parent, op))
            previous = self.engine.run_steps(steps)
            if turn not in self.engine.store.done_iterations():
                self.engine.store.event("iteration_done", iteration=turn, **summary(previous))
        return self.engine.store.best()
