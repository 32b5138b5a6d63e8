"""Group timing: kernels that are compared with each other are timed against each other.

GRPO ranks the answers of a group against each other, so timing noise between two correct
answers becomes a random advantage: the same dot kernel was paid 1.85 in one step and 2.52 in
another, timed minutes apart. Here the correct answers of a group and the task's baseline are
timed in interleaved rounds, B A1 A2 ... B A1 A2 ..., each round one full protocol run per
kernel (fresh inputs, check call, timed run in the exclusive lane, verification), so that a
drift of the machine falls on every member of a round alike. A kernel's speedup is the median
over rounds of the baseline's time over its time in the same round; `speedup_low` is a
distribution-free lower bound on that median (a sign test over the rounds, at 95%).

Only C-family kernels are re-timed (a PyTorch candidate is already timed in paired calls
against its reference), and only in groups of two or more correct answers: one alone is
ranked against failures, whatever its time. A kernel that fails a later round is judged by
that failure. An answer written twice in a group is timed once a round, and both copies are
judged by those rounds (so they are paid alike). The Outcomes are new: nothing of a group's
timing goes to the outcome cache, whose entries are one kernel's timing alone.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, Sequence

from .config import EvalConfig
from .outcome import CHECK_ONLY, Outcome, sign_test_rank
from .tasks import Task

ROUNDS = 5  # a sign test over 5 paired rounds bounds the median at 97% with the smallest ratio
ALPHA = 0.05
# Each round's run of a kernel starts with the check call, as an evaluation's does. Its outputs
# are verified again in the timed run, so the rounds could do without it; measured, that saves
# nothing (benchmarks/group_timing_cost.py: 1.00x), and one protocol for every run is simpler.
CHECK_CALL_IN_ROUNDS = True


def judge_in_groups(tasks: Sequence[Task], texts: Sequence[str], configs: Sequence[EvalConfig],
                    group_size: int,
                    judge: Callable[[list[int], list[EvalConfig]], list[Outcome]]
                    ) -> list[Outcome]:
    """Every answer judged, and the correct C-family answers of each group (consecutive
    `group_size` answers, one task) timed against each other (retime_group). An answer the
    rounds time is not timed alone first: a first pass judges every answer up to its check
    call (CHECK_ONLY), the rounds then judge the correct ones in full, five times over, and an
    answer they did not time (the one correct answer of its group, or one whose baseline failed
    the rounds) is judged alone in full after them. `judge(indices, configs)` judges those
    answers with those configs, in one batch, and returns their Outcomes in that order."""
    from .backends import backend_for
    first = [check_only(c) if backend_for(t).separate_baseline else c
             for t, c in zip(tasks, configs)]
    outcomes = judge(list(range(len(texts))), first)
    for g in range(0, len(texts), group_size):
        outcomes[g:g + group_size] = retime_group(tasks[g], texts[g:g + group_size],
                                                  outcomes[g:g + group_size], configs[g])
    rest = [i for i, o in enumerate(outcomes) if CHECK_ONLY in o.flags]
    if rest:
        for i, o in zip(rest, judge(rest, [configs[i] for i in rest])):
            outcomes[i] = o
    return outcomes


def check_only(config: EvalConfig) -> EvalConfig:
    """`config` judging up to the check call (CHECK_ONLY), with no baseline to time."""
    return config.replace(compare_baseline=False, extra={**config.extra, CHECK_ONLY: True})


def confirm_against_baseline(task: Task, text: str, outcome: Outcome, config: EvalConfig,
                             rounds: int = ROUNDS) -> Outcome:
    """One correct kernel timed again against the baseline in interleaved rounds, each a run
    of its own: the speedup a search reports as its result. A speedup measured in one run
    against a baseline timed in another carries the drift between them (a search once called
    the naive kernel itself 1.19x naive, under a within-run interval of +-0.9%)."""
    return retime_group(task, [text], [outcome], config, rounds, min_members=1)[0]


def retime_group(task: Task, texts: Sequence[str], outcomes: Sequence[Outcome],
                 config: EvalConfig, rounds: int = ROUNDS,
                 size: dict[str, int] | None = None,
                 order: list[str] | None = None, min_members: int = 2,
                 baseline_failure: list[Outcome] | None = None) -> list[Outcome]:
    """`outcomes` (each answer judged alone) with the correct C-family answers timed again in
    interleaved rounds with the baseline, when at least `min_members` are correct. `order`,
    when given, receives the label of every timed run in the order the lane ran them
    ("baseline", or the answer's index); `baseline_failure` the baseline's Outcome when it
    did not build or failed a round (the answers then keep their own timings)."""
    from .evaluate import BASELINE_COPY, _maker, is_baseline_copy, ok_message, prepare
    from .backends import backend_for
    if rounds < ROUNDS:
        raise ValueError(f"group timing needs at least {ROUNDS} rounds: fewer cannot bound a "
                         "speedup at 95%")
    if not backend_for(task).separate_baseline:
        return list(outcomes)
    members = [i for i, o in enumerate(outcomes) if o.ok]
    if not members or len(members) < min_members:  # a group of one is ranked against failures
        # whatever its time: its timing alone stands
        return list(outcomes)
    size = dict(size or task.default_size)
    # each round times every member once: the round's share of the usual timing budget
    cfg = config.replace(use_cache=False, max_time=max(config.max_time / rounds, 0.05),
                         extra={**config.extra, "check_first": CHECK_CALL_IN_ROUNDS,
                                CHECK_ONLY: False})
    # an answer written twice in a group (22% of the group-timed answers of a learning run)
    # is one kernel: built and timed once a round, and the same rounds judge every copy
    first_with: dict[str, int] = {}
    first_of = {i: first_with.setdefault(texts[i], i) for i in members}
    sources = [("baseline", task.baseline.read_text())] + \
        [(i, texts[i]) for i in members if first_of[i] == i]
    prepared = {label: prepare(task, text, size, cfg) for label, text in sources}
    times: dict = {label: [] for label, _ in sources}
    last: dict = {}
    failed: dict = {}
    try:
        for _ in range(rounds):
            for label, _ in sources:
                p = prepared[label]
                if isinstance(p, Outcome) or label in failed:
                    continue
                o = p.backend.measure(p, _maker(task, size, cfg, time.monotonic(), p.machine,
                                                p.techniques))
                if order is not None:
                    order.append("baseline" if label == "baseline" else str(label))
                if not o.ok:
                    failed[label] = o
                    continue
                times[label].append(o.timing.median)
                last[label] = o
    finally:
        for p in prepared.values():
            if not isinstance(p, Outcome):
                p.backend.cleanup(p)
    base = times["baseline"]
    if baseline_failure is not None and isinstance(prepared["baseline"], Outcome):
        baseline_failure.append(prepared["baseline"])
    elif baseline_failure is not None and "baseline" in failed:
        baseline_failure.append(failed["baseline"])
    result = list(outcomes)
    for i in members:
        j = first_of[i]  # the copy that was timed
        if j in failed:  # a correct answer that failed a later round is judged by it
            result[i] = dataclasses.replace(failed[j])
            continue
        if isinstance(prepared[j], Outcome):  # it did not build for the rounds (an answer
            result[i] = dataclasses.replace(prepared[j])  # taken as OK, e.g. a confirmation's)
            continue
        if j not in last:
            continue  # (cannot happen: a member that ran no round failed one)
        if not base or "baseline" in failed:
            continue  # no baseline to pair with: the answer keeps its own timing
        ratios = sorted(b / t for b, t in zip(base, times[j]) if t > 0)
        k = sign_test_rank(len(ratios), ALPHA)
        o = dataclasses.replace(last[j])  # each answer its own Outcome
        median_time = statistics.median(times[j])
        flops = task.flop_count(size)
        o.gflops = flops / median_time / 1e9 if flops else o.gflops
        o.speedup = statistics.median(ratios)
        o.speedup_low = ratios[k - 1] if k > 0 else 0.0
        if is_baseline_copy(task, prepared[j].code):
            o.speedup, o.flags = 1.0, [*o.flags, BASELINE_COPY]
        o.flags = [*o.flags, "group_timed"]
        o.message = ok_message(o) + (f"; timed in {len(ratios)} rounds with its group"
                                     if len(members) > 1 else
                                     f"; timed in {len(ratios)} rounds against the baseline")
        result[i] = o
    return result
