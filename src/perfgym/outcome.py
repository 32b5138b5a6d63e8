"""The result of one evaluation: a status plus every measurement and diagnostic behind it."""
from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """Where in the pipeline a candidate stopped. Ordered from worst to best (the online-RL
    paper, eq. 3).

    HOST_ERROR is no verdict on the candidate: the host failed while evaluating it (an exception
    in a batch, see executors). It sorts first so a multi-size fold that holds one is no verdict
    either, and reward schemes refuse it (rewards.refused)."""

    HOST_ERROR = "HOST_ERROR"
    FORMAT_ERROR = "FORMAT_ERROR"
    LIBRARY_VIOLATION = "LIBRARY_VIOLATION"
    STAGE_VIOLATION = "STAGE_VIOLATION"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    WRONG_ANSWER = "WRONG_ANSWER"
    OK = "OK"

    @property
    def ok(self) -> bool:
        return self is Status.OK


@dataclass
class Timing:
    """Per-call wall times of the kernel, measured inside the harness (seconds)."""

    samples: list[float]
    warmups: int
    median: float
    minimum: float
    mean: float
    cv: float  # coefficient of variation (stdev / mean) of all samples
    trimmed_cv: float  # the same without the slowest 10% (rare preemptions)
    converged: bool  # True when the median's precision met the target before a cap
    # the stop rule: half the width of the median's 95% confidence interval over the median
    # (None below 6 samples, where there is none, and in outcomes stored before it was kept)
    median_halfwidth: float | None = None
    # the medians of the processes it was timed in, fastest first: a baseline's always
    # (evaluate.BASELINE_PROCESSES), a candidate's where its baseline's processes disagreed;
    # None for a candidate timed in one process
    process_medians: list[float] | None = None
    # a baseline's: its processes disagreed by more than evaluate.PROCESS_SPREAD_LINE, or the
    # size's did within evaluate.DISAGREEMENT_MEMORY timings before; then it keeps its fastest
    # process, and a candidate at its size is timed in as many processes and keeps its fastest
    processes_disagree: bool = False
    # ... how many timings ago they last did (0: this one), None when not within that memory
    timings_since_disagreement: int | None = None

    @classmethod
    def from_samples(cls, samples: list[float], warmups: int, precision: float) -> "Timing":
        n = len(samples)
        s = sorted(samples)
        mean = sum(s) / n
        halfwidth = median_halfwidth(s)
        known = math.isfinite(halfwidth)  # (no inf in an Outcome: strict JSON has none)
        return cls(samples=samples, warmups=warmups, median=_median(s), minimum=s[0],
                   mean=mean, cv=_cv(s), trimmed_cv=_cv(s[: n - n // 10]),
                   converged=halfwidth <= precision,
                   median_halfwidth=halfwidth if known else None)


def sign_test_rank(n: int, alpha: float) -> int:
    """The largest k with P(Binomial(n, 1/2) < k) <= alpha: the k-th smallest of n samples lies
    below their median with probability at least 1 - alpha, whatever their distribution."""
    k, below = 0, 0.0
    while k < n:
        more = below + math.comb(n, k) / 2 ** n
        if more > alpha:
            break
        below, k = more, k + 1
    return k


def median_ci_rank(n: int) -> int:
    """j such that [j-th smallest, j-th largest] of n samples is a 95% confidence interval for
    the median, whatever their distribution (sign_test_rank at 2.5% a side; the normal
    approximation past 100 samples); 0 below 6 samples, where none exists. The harness's stop
    rule computes the same (harness.c, median_ci_rank)."""
    return int(n / 2 - 0.98 * math.sqrt(n)) if n > 100 else sign_test_rank(n, 0.025)


def median_halfwidth(ordered: list[float]) -> float:
    """Half the width of the median's 95% confidence interval over the median, of samples in
    ascending order (inf when there are too few, or the median is not positive)."""
    n = len(ordered)
    j, median = median_ci_rank(n), _median(ordered) if ordered else 0.0
    if j < 1 or not median > 0:
        return math.inf
    return (ordered[n - j] - ordered[j - 1]) / 2 / median


def _median(s: list[float]) -> float:
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _cv(xs: list[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return var**0.5 / mean if mean > 0 else 0.0


# A config's extra[CHECK_ONLY]: a C-family kernel is judged up to its check call and not timed
# (an Outcome OK with this flag, no timing, never cached). Group timing's first pass: a kernel
# its group's rounds time gets no timed run alone, whose figures the rounds would replace
# (perfgym.group_timing.judge_in_groups).
CHECK_ONLY = "check_only"


@dataclass
class Outcome:
    """Everything one evaluation found. Serializes to JSON with `to_dict`."""

    status: Status
    task: str
    sizes: dict[str, int]
    message: str = ""  # one line a person (or a repair prompt) reads first
    details: str = ""  # compiler diagnostics, wrong-answer location, crash signal...
    stage: int | None = None
    techniques: list[str] = field(default_factory=list)
    timing: Timing | None = None
    gflops: float | None = None
    gbps: float | None = None
    speedup: float | None = None  # over the task's naive baseline, same size and flags
    fraction_of_peak: float | None = None  # of this machine's measured FMA peak (task precision)
    # of the roofline bound min(peak, intensity x bandwidth); memory-bound tasks judged fairly
    fraction_of_roofline: float | None = None
    bound: str | None = None  # "compute" or "memory": which roof applies at this intensity
    max_error: float | None = None
    machine: dict[str, Any] = field(default_factory=dict)  # fingerprint and peak
    config: dict[str, Any] = field(default_factory=dict)  # compiler, flags, threads, verify mode
    elapsed: float = 0.0  # wall seconds the whole evaluation took
    cached: bool = False
    per_size: list[dict[str, Any]] = field(default_factory=list)  # set when sizes are folded
    flags: list[str] = field(default_factory=list)  # e.g. precision_downcast, implausible_speedup
    device: str | None = None  # where a PyTorch candidate was timed: "cuda" or "cpu"
    reference_timing: Timing | None = None  # the PyTorch reference, timed the same way
    # C tasks: the harness's per-call times next to the parent's own clock (evaluate.cross_check)
    # and how many samples were charged the parent's figure; `timing` holds the charged samples
    parent_check: dict[str, Any] | None = None
    # a 99.9% lower confidence bound on the speedup over paired reference/candidate calls (sign
    # test): "faster" means this is above 1, so noise never earns a bonus
    speedup_low: float | None = None
    # profiling feedback (perfgym.profiling, asked by EvalConfig.profile): provider -> its
    # lines, and "ran" -> which providers ran and which fell through
    profile: dict[str, str] | None = None
    # why the timing is not to be trusted: other programs took the CPU in every timed run
    # (C tasks; the figures are in parent_check["load"]). Never cached.
    disturbed: str | None = None
    # the kernel is, up to names and whitespace, a memory kernel its prompt could show (which
    # one: "memory #ID: TASK at SIZE (SOURCE)"); set by a search with --memory. It passed, but
    # it is not the model's own result: no reward scheme and no best-kernel choice counts it.
    copied_from: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Outcome":
        d = dict(d)
        d["status"] = Status(d["status"])
        for key in ("timing", "reference_timing"):
            if d.get(key):
                d[key] = Timing(**d[key])
        return cls(**d)
