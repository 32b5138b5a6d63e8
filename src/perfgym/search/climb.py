"""Climb: textbook transforms, one at a time, each from a verified parent.

    parent = the naive kernel, judged at the task's train sizes
    each round, while the budget has room:
        ask for the first `per_round` transforms not yet in the parent's line (loop order,
        OpenMP on the outer loop, an inner loop the compiler vectorizes, blocking with bounded
        ends, register blocking), `samples` answers each, all from the parent
        the fastest child that is right at every train size, by the geometric mean of its
        rates there, replaces the parent when it is at least `min_gain` faster
    result: the fastest kernel right at the train sizes

Why (docs/commands/search.md): SQD's stages forbid OpenMP until stage 4 and ask an open
"make it faster"; the coder answered with blocked loops at 3x naive, while dgemm's naive loops
in i-k-j order alone are 6-9x. Asked for one named change of a kernel that works, a small model
writes that change; compounding the ones that pay climbs past what one answer reaches. A step
is kept only when it holds at every train size, so a kernel fast at one size and slow or wrong
at another never becomes a parent.

Every answer is a slot in the run store, and a round's parent is named in its slots, so a
killed climb resumes where it stopped. With `budget_seconds` a round starts only when the time
spent plus the longest round yet (scaled to its answer cap) fits.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ..backends import backend_for
from ..extract import code_shape
from ..store import Candidate
from .engine import Engine, Step, parent_code
from .sqd import summary

TRANSFORMS = ("loop_order", "openmp", "vectorize", "blocking", "unroll")
# A climb's answer may take its parent's tokens times ANSWER_GROWTH plus ANSWER_SLACK (at least
# MIN_ANSWER_TOKENS, at most ANSWER_CEILING), in place of the sampler's own limit. Of the
# coder's 278 right answers to a named change in the Intel and AMD run stores, 95% were at
# most 1.48x their parent's tokens; the longest, blocking of a 149-token naive kernel, 434
# tokens. The sampler's 768 could not hold one change of dgemm's jammed 1,027-token parent:
# all 128 answers of three vLLM draws ran to it and none compiled (docs/models/coder.md).
ANSWER_GROWTH, ANSWER_SLACK = 1.5, 256
MIN_ANSWER_TOKENS = 384
# a prompt shows at most PARENT_CODE_CHARS of the parent (about 3,000 tokens): with this much
# answer it stays inside the coder's 8k context
ANSWER_CEILING = 4096
# The stage rules of a step that is not about threads, until OpenMP is in the kernel's line:
# SQD's stage 3, every technique but OpenMP (and prefetching). Asked for a loop order with
# <omp.h> in its opening, the coder wrote `#pragma omp parallel for collapse(2)` over the
# naive loops instead (4 of 4 answers); at this stage its opening has no <omp.h> and an
# OpenMP answer is a stage violation, not the parent of the next round.
NO_THREADS = 3
# the transform each of perfgym's own rewrites is (search/rewrites.py)
REWRITE_IS = {"sink_sum": "loop_order", "omp_outer": "openmp", "omp_inner": "openmp",
              "simd_inner": "vectorize", "unroll_jam": "unroll"}


@dataclass
class ClimbConfig:
    transforms: tuple[str, ...] = TRANSFORMS
    samples: int = 4  # answers per transform per round
    # transforms a round asks for, the first not yet in the parent's line in `transforms`
    # order: a round of two is one batch of the engine's (8 answers), and the textbook order
    # (loop order before threads before blocking) is the order they pay in
    per_round: int = 2
    rounds: int = 40  # at most (the budget usually ends it first)
    # a child replaces its parent only this much faster (geometric mean over the sizes
    # judged): below it, a timing's noise on a busy machine would pick
    min_gain: float = 1.05
    budget_seconds: float | None = None  # no round past this (None: all of them)
    max_answer_tokens: int | None = None  # a ceiling on every answer's cap (--max-tokens)
    rewrites: bool = True  # perfgym's own textbook rewrites beside the model's answers
    # the sampler's temperature for a transform asked again of a parent after k rounds in
    # which every answer to it was the parent's own code: reheat[k - 1] (the last past its
    # end; never below the sampler's own). At the coder's T = 0.3 a kernel shown in the
    # prompt is copied token for token: an Intel dgemm climb got 46 answers in 6 rounds, all
    # byte-identical to their parent, 8 of its 12 minutes (docs/commands/search.md)
    reheat: tuple[float, ...] = (0.7, 1.0)

    def __post_init__(self) -> None:
        from ..prompts import transform_names
        if min(self.samples, self.rounds, self.per_round) < 1 or self.min_gain < 1 \
                or any(t <= 0 for t in self.reheat):
            raise ValueError("samples, rounds and per_round are at least 1, min_gain at "
                             "least 1, reheat temperatures above 0")
        unknown = [t for t in self.transforms if t not in transform_names()]
        if not self.transforms or unknown:
            raise ValueError(f"transforms are among {', '.join(transform_names())}"
                             + (f", not {', '.join(unknown)}" if unknown else ""))


def _cap(steps: list[Step]) -> int | None:
    """The longest answer cap among a round's steps (None: rewrites, no model answers)."""
    return max((s.max_tokens or 0 for s in steps), default=0) or None


class SeedFailed(ValueError):
    """The task's own kernel is not right at the sizes a climb judges: no first parent."""


def transform_title(name: str) -> str:
    """A transform's name as its prompt says it ("one change: loop order")."""
    from ..prompts import transform_text
    return transform_text(name)[0]


@dataclass
class Climb:
    engine: Engine
    config: ClimbConfig = field(default_factory=ClimbConfig)
    clock: Callable[[], float] = time.time  # the budget's clock, kept in the events' data
    # why the last round was not started: {"answers", "cap", "need_seconds", "left_seconds"}
    unfit: dict = field(default_factory=dict)

    def run(self) -> Candidate | None:
        store = self.engine.store
        if not any(store.events("climb_started")):  # (a resumed run keeps its first start)
            store.event("climb_started", at=self.clock())
        parent = self._seed()
        for r in range(1, self.config.rounds + 1):
            # perfgym's own rewrites of a new parent first: they cost one evaluation each,
            # a round of the model's answers minutes
            rewrites = (self.rewrite_steps(r, parent)
                        if self._begun(r) or self._time_left() > 0 else [])
            steps = rewrites or self.plan(r, parent)
            if not self._begun(r):
                steps = self._fit(steps)
            if not steps:
                store.event("climb_stopped", round=r, budget=self.config.budget_seconds,
                            **self.unfit)
                break
            children = self.engine.run_steps(steps)
            better = self.better_child(parent, children)
            if better is not None:
                parent = better
            store.event("iteration_done", iteration=r, parent=parent.id,
                        climbed=better is not None, rewrites=bool(rewrites), at=self.clock(),
                        cap=_cap(steps), **summary(children))
        return store.best()

    def plan(self, r: int, parent: Candidate) -> list[Step]:
        """Round r's answers: each transform not yet in the parent's line, `samples` times
        (every transform again once all are in it)."""
        done = self.applied(parent)
        open_ = [t for t in self.config.transforms if t not in done] or list(
            self.config.transforms)
        # the ones asked of this parent least often first (then in their order): a round
        # that did not climb hands the next one the transforms it did not ask
        asked = {t: 0 for t in open_}
        for c in self.engine.store.candidates():
            if c.op == "transform" and c.parent_id == parent.id and c.slot.endswith(":0"):
                name = c.slot.split(":")[3]
                asked[name] = asked.get(name, 0) + 1
        todo = sorted(open_, key=lambda t: (asked[t], open_.index(t)))[:self.config.per_round]
        todo = [t for t in open_ if t in todo]
        # a resumed round keeps the steps it began with (its slots name them)
        begun = {c.slot.split(":")[3] for c in self.engine.store.candidates(r)
                 if c.slot.startswith(f"climb:{r}:")}
        if begun:
            todo = [t for t in self.config.transforms if t in begun]
        threaded = "openmp" in done
        cap = self.answer_cap(parent)
        heat = {t: self.temperature(r, parent, t) for t in todo}  # (once a transform)
        return [Step(f"climb:{r}:{parent.id}:{t}:{g}", r,
                     None if threaded or t == "openmp" else NO_THREADS, parent, "transform",
                     transform=t, max_tokens=cap, temperature=heat[t])
                for t in todo for g in range(self.config.samples)]

    def copied_rounds(self, r: int, parent: Candidate, transform: str) -> int:
        """The rounds before r in which every answer to `transform` asked of `parent` was the
        parent's own code (its shape: names, spaces and comments aside)."""
        task = self.engine.task
        same = code_shape(parent_code(task, parent))
        rounds: dict[int, bool] = {}
        for c in self.engine.store.candidates():
            if (c.op == "transform" and c.parent_id == parent.id and c.iteration < r
                    and c.slot.split(":")[3] == transform):
                copy = code_shape(parent_code(task, c)) == same
                rounds[c.iteration] = rounds.get(c.iteration, True) and copy
        return sum(rounds.values())

    def temperature(self, r: int, parent: Candidate, transform: str) -> float | None:
        """The sampler's temperature for round r's answers to `transform`: its own (None)
        until the parent's code came back unchanged, then the next of `reheat`."""
        k = self.copied_rounds(r, parent, transform) if self.config.reheat else 0
        if not k:
            return None
        own = self.engine.sampling.get("temperature", 1.0)
        hotter = self.config.reheat[min(k, len(self.config.reheat)) - 1]
        return hotter if hotter > own else None

    def rewrite_steps(self, r: int, parent: Candidate) -> list[Step]:
        """Round r as perfgym's own rewrites of the parent (search/rewrites.py), each stored as
        an answer before the round runs; none when none applies or this parent has had its
        rewrites already (a round that made them, or a resumed one)."""
        from .rewrites import REWRITES, rewrite
        store, task = self.engine.store, self.engine.task
        if not self.config.rewrites or not hasattr(task, "signature"):
            return []
        begun = [c for c in store.candidates(r) if c.slot.startswith(f"climb:{r}:")]
        if begun:  # a resumed round: the steps it began with
            return [self._step_of(c, parent) for c in begun if c.op == "rewrite"]
        if any(c.op == "rewrite" and c.parent_id == parent.id for c in store.candidates()):
            return []
        code = parent_code(task, parent)
        steps = []
        for name in REWRITES:
            new = rewrite(code, task.signature.name, name) if code else None
            if new is None:
                continue
            step = Step(f"climb:{r}:{parent.id}:rewrite-{name}:0", r, None, parent, "rewrite")
            store.add_pending(step.slot, r, None, parent.id, "rewrite", "perfgym", None,
                              f"```c\n{new}```\n")
            steps.append(step)
        return steps

    def _step_of(self, c: Candidate, parent: Candidate) -> Step:
        return Step(c.slot, c.iteration, c.stage, parent, c.op)

    def applied(self, candidate: Candidate) -> set[str]:
        """The transforms in a kernel's line (from its slots: climb:ROUND:PARENT:NAME:G; a
        rewrite counts as the transform it is)."""
        names = set()
        for c in self.engine.store.lineage(candidate.id):
            name = c.slot.split(":")[3] if c.slot.startswith("climb:") and c.iteration else ""
            if c.op == "transform":
                names.add(name)
            elif c.op == "rewrite":
                names.add(REWRITE_IS.get(name.removeprefix("rewrite-"), name))
        return names

    def better_child(self, parent: Candidate, children: list[Candidate]) -> Candidate | None:
        """The fastest child right at every size judged, when it beats the parent by
        `min_gain` (a copy of a memory kernel is never one: not the model's own). Fastest by
        its speedup over the naive kernel timed in the same evaluation, where it has one: a
        rate compared with a rate measured minutes before carries the machine's drift (on a
        busy host a jacobi2d child 1.12x its parent's GFLOP/s was 0.93x naive)."""
        task = self.engine.task
        same = code_shape(parent_code(task, parent))
        # the parent's own code again (its comments, includes or names aside) is no step:
        # timed again, it once "climbed" a jacobi2d parent by 26% on noise
        ok = [c for c in children if c is not None and c.ok and not c.copied and _speed(c) > 0
              and code_shape(parent_code(task, c)) != same]
        if not ok:
            return None
        best = max(ok, key=lambda c: (_speed(c), -c.id))
        return best if _speed(best) >= _speed(parent) * self.config.min_gain else None

    def answer_cap(self, parent: Candidate) -> int:
        """The tokens a model's answer to a change of `parent` may take, in place of the
        sampler's limit: about as long as the parent (see ANSWER_GROWTH). Not the sampler's
        limit: one change of a long parent needs more, and a batch decodes until its longest
        answer ends, so a short parent's round should not wait on answers that run on (a
        dgemm round waited 400 s on two answers that ran to 768 tokens, both wrong)."""
        tokens = self.parent_tokens(parent_code(self.engine.task, parent) or "")
        cap = max(MIN_ANSWER_TOKENS, round(tokens * ANSWER_GROWTH + ANSWER_SLACK))
        return min(cap, ANSWER_CEILING, self.config.max_answer_tokens or ANSWER_CEILING)

    def parent_tokens(self, code: str) -> int:
        """`code`'s tokens by the policy's tokenizer, else half its characters (C kernels ran
        1.97-2.84 characters a token in the coder's tokenizer, 434 kernels: an over-count)."""
        tokenizer = getattr(self.engine.policy, "tokenizer", None)
        if tokenizer is not None:
            return len(tokenizer(code)["input_ids"])
        return len(code) // 2

    def _begun(self, r: int) -> bool:
        return any(c.slot.startswith(f"climb:{r}:") for c in self.engine.store.candidates(r))

    def _fit(self, steps: list[Step]) -> list[Step]:
        """The steps when their round fits the time left, else none. A round's time: the
        longest round of answers yet, scaled to these steps' answer cap (a batch decodes
        until its longest answer ends: a long parent's round takes several times a short
        one's); before any, the engine probe's rate over these answers, each to the cap.
        Never cut to fewer answers: a round's answers decode as one batch, and fewer take
        nearly as long (an Intel dgemm round on OpenVINO: 4 answers 416 s, 8 at the same cap
        441 s; cut to 4, it ended the search 139 s past its budget)."""
        if self.config.budget_seconds is None:
            return steps
        left = self._time_left()
        cap = _cap(steps)
        rounds = [s * cap / was if cap and was else s for s, was in self._round_times()]
        if not rounds:
            rate = getattr(self.engine.policy, "tokens_per_second", None)
            if rate and cap:
                rounds = [len(steps) * cap / rate]
        need = max(rounds, default=0.0)
        if left > 0 and need <= left:
            return steps
        self.unfit = {"answers": len(steps), "cap": cap, "need_seconds": round(need, 1),
                      "left_seconds": round(left, 1)}
        return []

    def _time_left(self) -> float:
        if self.config.budget_seconds is None:
            return float("inf")
        started = next(d["at"] for _, _, d in self.engine.store.events("climb_started"))
        return self.config.budget_seconds - (self.clock() - started)

    def _round_times(self) -> list[tuple[float, int | None]]:
        """(seconds, answer cap) of each finished round of the model's answers (a round of
        rewrites is a few evaluations: no measure of the next round of answers; a run from
        before caps were recorded has None)."""
        store = self.engine.store
        marks = [d["at"] for _, _, d in store.events("climb_started")][:1]
        rows = []
        for _, _, data in store.events("iteration_done"):
            if not data.get("rewrites"):
                rows.append((data["at"] - marks[-1], data.get("cap")))
            marks.append(data["at"])
        return rows

    def _seed(self) -> Candidate:
        store = self.engine.store
        step = Step("climb:0:seed", 0, None, None, "seed")
        if store.by_slot(step.slot) is None:
            store.add_pending(step.slot, 0, None, None, "seed", "seed", None,
                              self.engine.task.baseline.read_text())
        seed = self.engine.run_steps([step])[0]
        if not seed.ok:
            raise SeedFailed(f"the task's own kernel failed at the sizes judged, so there is "
                             f"nothing to climb from: "
                             f"{seed.outcome.get('message') if seed.outcome else ''}")
        return seed


def stop_line(store) -> str | None:
    """Why a climb ended before its budget: its next round of the model's answers would not
    fit the time left (on a slow engine the first may never fit: a 2-core AVX2 EPYC decoding
    the coder at 15 tokens/s, dgemm's rewritten parent asking up to 1,789 tokens an answer)."""
    stops = [d for _, _, d in store.events("climb_stopped")]
    if not stops or not stops[-1].get("need_seconds") or stops[-1]["left_seconds"] <= 0:
        return None
    d = stops[-1]
    return (f"stopped before round {d['round']}: its {d['answers']} answers, up to {d['cap']} "
            f"tokens each, would take about {d['need_seconds']:.0f} s on this machine's engine, "
            f"and {d['left_seconds']:.0f} s of the budget are left (--budget-minutes gives more)")


def _speed(c: Candidate) -> float:
    """A kernel's speedup over naive (geometric mean over the sizes judged), else its rate."""
    speedup = (c.outcome or {}).get("speedup")
    return speedup if speedup else c.rate


def climbs(task) -> bool:
    """Whether climb's transforms fit the task: C-family kernels (a PyTorch task's answers
    are modules, not loop nests)."""
    return backend_for(task).separate_baseline
