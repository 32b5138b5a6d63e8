"""The result of one evaluation: a status plus every measurement and diagnostic behind it."""
from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """Where in the pipeline a candidate stopped. Ordered from worst to best (seed 000, eq. 3).

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
    trimmed_cv: float  # the same without the slowest 10% (rare preemptions); the stop rule
    converged: bool  # True when the trimmed CV met the target before a cap

    @classmethod
    def from_samples(cls, samples: list[float], warmups: int, cv_target: float) -> "Timing":
        n = len(samples)
        s = sorted(samples)
        mean = sum(s) / n
        median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
        trimmed = _cv(s[: n - n // 10])
        return cls(samples=samples, warmups=warmups, median=median, minimum=s[0], mean=mean,
                   cv=_cv(s), trimmed_cv=trimmed, converged=trimmed <= cv_target)


def _cv(xs: list[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return var**0.5 / mean if mean > 0 else 0.0


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
