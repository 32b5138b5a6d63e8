"""Multi-turn credit: the return of a refinement trajectory (a kernel, the gym's feedback, a
revised kernel, ...) from the scores of its turns.

Each turn is scored by a per-answer reward scheme (tiered, weighted or log_speedup: a score
that does not depend on the other answers). The trajectory's return is then one of:

  best        the best turn's score: the trajectory is worth its best kernel
  last        the last turn's score: the trajectory is worth where it ended
  discounted  (s_1 + g s_2 + g^2 s_3 + ...) / (1 + g + g^2 + ...): every turn counts, later
              ones less ("Kevin: Multi-Turn RL for Generating CUDA Kernels" sums discounted
              later scores). A weighted mean, not the plain sum: with the sum, a correct but
              deliberately worse first kernel and then the good one (M + g G) outscores the
              good one at once (G) whenever M > (1 - g) G.

and GRPO takes the advantage within the group of trajectories for the same prompt.

Two ways to game a return are closed here, whichever scheme:
- **Stalling.** A turn whose kernel repeats an earlier turn's (the same code, whitespace and
  comments aside) adds nothing: every return leaves it out.
- **Breaking an early turn on purpose** (or writing a worse kernel first) to earn a large
  repair later: no scheme pays for an improvement as such. best and last pay the kernel
  reached, which the trajectory could have written at once; the discounted mean weighs every
  distinct turn, so a worse first turn only lowers it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

RETURNS = ("best", "last", "discounted")
TURN_SCHEMES = ("tiered", "weighted", "log_speedup")  # per answer, not per group


@dataclass
class Turn:
    """One turn of a trajectory: its kernel (normalized; None when none could be extracted),
    its status and its score."""

    kernel: str | None
    status: str
    score: float


def counted(turns: Sequence[Turn]) -> list[Turn | None]:
    """The turns with every repeat of an earlier turn's kernel replaced by None (left out of
    every return). Two answers with no kernel are not repeats of each other (each is its own
    failure)."""
    seen: set[str] = set()
    out: list[Turn | None] = []
    for turn in turns:
        if turn.kernel is not None and turn.kernel in seen:
            out.append(None)
            continue
        if turn.kernel is not None:
            seen.add(turn.kernel)
        out.append(turn)
    return out


def trajectory_return(turns: Sequence[Turn], kind: str = "best", gamma: float = 0.4) -> float:
    """The return of one trajectory (see the module's docstring)."""
    if kind not in RETURNS:
        raise ValueError(f"turn return {kind!r} is not one of {', '.join(RETURNS)}")
    if not turns:
        raise ValueError("a trajectory has at least one turn")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma {gamma} is not within [0, 1]")
    kept = counted(turns)
    scores = [t.score for t in kept if t is not None]  # the first turn is never a repeat
    if kind == "best":
        return max(scores)
    if kind == "last":
        return scores[-1]
    # discounted by rank among the distinct turns: a repeat in between shifts nothing
    weights = [gamma ** i for i in range(len(scores))]
    return sum(w * s for w, s in zip(weights, scores)) / sum(weights)


def stop_early(speedup_over_naive: float | None, expert_speedup: float | None) -> bool:
    """A trajectory ends once a turn's kernel reaches the task's expert speed: more turns
    cannot be asked to do better than the reference the task ships."""
    return (speedup_over_naive is not None and expert_speedup is not None
            and speedup_over_naive >= expert_speedup)
