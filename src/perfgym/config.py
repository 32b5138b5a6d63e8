"""EvalConfig: every knob of one evaluation, with the defaults the seed used."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any

OPT_LEVELS = ("O0", "O1", "O2", "O3", "Ofast", "Os")


@dataclass(frozen=True)
class EvalConfig:
    opt: str = "O3"
    compiler: str = "gcc"
    march: str = "native"
    extra_flags: tuple[str, ...] = ()
    stage: int | None = None  # None: no stage rules
    strict_stages: bool = False  # also enforce the cache-blocking detector
    verify: str | None = None  # "full" | "sampled"; None: the task's own mode
    threads: int | None = None  # OpenMP threads; None: every core this process may use
    timeout: float = 8.0  # seconds for the whole timed run (as in the online-RL paper)
    compile_timeout: float = 60.0
    # the timed calls end when the median is known to within this (relative half-width of its
    # 95% confidence interval), or at a cap below
    median_precision: float = 0.02
    min_samples: int = 5
    max_samples: int = 100
    max_time: float = 1.0  # seconds of timed calls before giving up on the precision
    warmup_min: int = 1
    warmup_time: float = 0.02  # the correctness call before it warms too
    compare_baseline: bool = True  # time the task's naive kernel too, for the speedup
    use_cache: bool = True
    seed: int | None = None  # input seed; None: a fresh secret one per evaluation
    # PyTorch/Triton/CUDA tasks
    trials: int = 3  # correctness trials, each with fresh inputs and weights
    require_custom_kernel: bool = True  # False: plain PyTorch candidates are scored too
    device: str | None = None  # "cuda" or "cpu"; None: cuda when there is a GPU
    torch_timeout: float = 180.0  # seconds for the whole worker: import, trials, timing
    input_budget: int | None = None  # shrink a problem's sizes to this many elements per tensor
    kernelbench: bool = False  # KernelBench's protocol: seed 42, 5 trials, mean of 100 calls
    # profiling providers to run on each measured candidate (perfgym.profiling; () = none)
    profile: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.opt not in OPT_LEVELS:
            raise ValueError(f"optimization level {self.opt!r} is not one of "
                             f"{', '.join(OPT_LEVELS)}")
        if self.stage is not None and self.stage not in range(1, 7):
            raise ValueError(f"stage {self.stage} does not exist: stages are 1-6")
        if self.verify not in (None, "full", "sampled"):
            raise ValueError(f"verify mode {self.verify!r} is not 'full' or 'sampled'")
        if self.threads is not None and self.threads < 1:
            raise ValueError("threads must be at least 1")
        object.__setattr__(self, "profile", tuple(self.profile))  # a list from JSON too

    @property
    def n_threads(self) -> int:
        return self.threads or len(os.sched_getaffinity(0))

    def replace(self, **changes: Any) -> "EvalConfig":
        return replace(self, **changes)

    def build_flags(self) -> list[str]:
        """The flags every kernel is built with; the backend adds its language's -std."""
        return [f"-{self.opt}", f"-march={self.march}", "-fopenmp", *self.extra_flags]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("extra")
        d["threads"] = self.n_threads
        return d
