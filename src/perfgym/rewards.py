"""Reward schemes by name: a group of Outcomes in, one reward per Outcome out.

Schemes see the whole group because some (group-normalized) score relative to it; the others
score each Outcome alone.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from .outcome import Outcome, Status

# the online-RL paper, eq. 3: penalties by how far down the pipeline a candidate got
TIERED_PENALTY = {
    Status.FORMAT_ERROR: -100.0,
    Status.LIBRARY_VIOLATION: -100.0,
    Status.STAGE_VIOLATION: -100.0,
    Status.COMPILE_ERROR: -40.0,
    Status.TIMEOUT: -30.0,
    Status.RUNTIME_ERROR: -20.0,
    Status.WRONG_ANSWER: -10.0,
}


def penalty(o: Outcome, opened: bool = False) -> float:
    """The tiered penalty of a failed Outcome. In an opened answer (perfgym.opening) perfgym
    wrote the fence and the signature, so the answer parses by construction: its parse tier is
    not the model's to earn, and a compile error pays no more than a format error."""
    if opened and o.status is Status.COMPILE_ERROR:
        return TIERED_PENALTY[Status.FORMAT_ERROR]
    return TIERED_PENALTY[o.status]


def tiered(group: Sequence[Outcome], opened: bool = False) -> list[float]:
    """Penalty for failures, GFLOP/s for successes (the online-RL paper, experiment 1)."""
    return [(o.gflops or 0.0) if o.ok else penalty(o, opened) for o in group]


def group_normalized(group: Sequence[Outcome], opened: bool = False) -> list[float]:
    """Penalty for failures, GFLOP/s / best GFLOP/s in the group x 100 for successes (the
    online-RL paper, experiment 2: keeps the signal in stages where absolute performance is low)."""
    best = max((o.gflops or 0.0 for o in group if o.ok), default=0.0)
    # the ratio first: (g / g) * 100 is exactly 100, 100 * g / g need not be (g = 84.43...)
    return [(100.0 * ((o.gflops or 0.0) / best) if best > 0 else 0.0) if o.ok
            else penalty(o, opened) for o in group]


def weighted(group: Sequence[Outcome], opened: bool = False) -> list[float]:
    """0.4 compiles + 0.4 correct + 0.2 faster than the baseline (KernelCompare). It has no parse
    term to withhold from an opened answer; an opened answer whose body holds no statement is
    not joined (opening.full_answer), so an empty body never earns "compiles"."""
    compiled_statuses = {Status.TIMEOUT, Status.RUNTIME_ERROR, Status.WRONG_ANSWER, Status.OK}
    return [0.4 * (o.status in compiled_statuses) + 0.4 * o.ok + 0.2 * faster(o) for o in group]


def faster(o: Outcome) -> bool:
    """Faster than the baseline: by the confidence bound where paired calls give one."""
    if not o.ok or o.speedup is None:
        return False
    return (o.speedup_low if o.speedup_low is not None else o.speedup) > 1.0


def log_speedup(group: Sequence[Outcome], opened: bool = False) -> list[float]:
    """log2 of the speedup over the baseline for successes; tiered penalty / 10 for failures,
    so failures stay below any working kernel slower than 2^-10 of the baseline."""
    return [math.log2(o.speedup) if o.ok and o.speedup else
            (0.0 if o.ok else penalty(o, opened) / 10.0) for o in group]


# The speed reward's noise band: a correct kernel within this factor of the naive one, and not
# faster by the evaluator's bound, is paid as the naive kernel (0). A C kernel's speedup is one
# evaluation's median ratio; a copy of the naive kernel measured up to 1.19x on a noisy AMD
# part, so a narrower band would pay noise.
SPEED_BAND = 1.1
SPEED_FLOOR = 0.1  # a correct kernel slower than 10x below naive is paid as 0.1x


def speed(group: Sequence[Outcome], opened: bool = False) -> list[float]:
    """A reward that pays speed and only speed, behind a correctness gate (the learning-speed
    experiment's reward): ln(speedup over the naive kernel) for a correct kernel, 0 for one
    that is not clearly faster or slower than naive (a copy of it earns exactly 0), floored
    at ln(0.1); a failure earns ln(0.1) plus its tiered penalty / 100 (-2.40 to -3.30), below
    every correct kernel, wrong answers closest."""
    out = []
    for o in group:
        if not o.ok:
            out.append(math.log(SPEED_FLOOR) + penalty(o, opened) / 100.0)
        elif not o.speedup or "baseline_copy" in o.flags:
            out.append(0.0)
        elif faster(o) and o.speedup >= SPEED_BAND:
            out.append(math.log(o.speedup))
        elif o.speedup <= 1.0 / SPEED_BAND:
            out.append(math.log(max(o.speedup, SPEED_FLOOR)))
        else:
            out.append(0.0)
    return out


SCHEMES: dict[str, Callable[..., list[float]]] = {
    "tiered": tiered,
    "group_normalized": group_normalized,
    "weighted": weighted,
    "log_speedup": log_speedup,
    "speed": speed,
}


def refused(o: Outcome, refuse_disturbed: bool = True) -> bool:
    """Outcomes no scheme rewards: the host failed, the candidate was never judged; or the
    kernel is a copy of one the kernel memory showed (not the model's own result); or, with
    `refuse_disturbed`, its timing was disturbed by other programs in every run (its GFLOP/s
    and speedup can be 100x off: a reward from them would teach noise)."""
    return (o.status is Status.HOST_ERROR or o.copied_from is not None
            or (refuse_disturbed and o.disturbed is not None))


def score(scheme: str, group: Sequence[Outcome], refuse_disturbed: bool = True,
          opened: bool = False) -> list[float]:
    """Rewards for `group`; a refused Outcome gets NaN (no reward: nothing to learn from) and
    is left out of the group the others are scored in. Disturbed timings are refused unless
    `refuse_disturbed` is False: a sample left out costs a training step less than a wrong
    ranking, and they are rare (a disturbed run is repeated twice before it is flagged).
    `opened`: the group's answers were opened by perfgym (penalty)."""
    if scheme not in SCHEMES:
        raise ValueError(f"reward scheme {scheme!r} is not one of {', '.join(SCHEMES)}")
    judged = iter(SCHEMES[scheme]([o for o in group if not refused(o, refuse_disturbed)],
                                  opened=opened))
    return [math.nan if refused(o, refuse_disturbed) else next(judged) for o in group]
