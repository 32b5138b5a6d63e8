"""Check a suite of KernelBench-format problems against itself: each problem's reference, renamed
to ModelNew, is scored as the candidate. Every problem must load and pass, and no copy may be
called faster than its original: its speedup is 1x within the measured noise, and the "faster"
verdict needs the 99.9% lower bound of the paired speedup above 1 (Outcome.speedup_low)."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import EvalConfig
from ..errors import HostError
from .spec import TaskError
from .torch_task import load_torch_task


def reference_as_candidate(source: str) -> str:
    """The problem's own Model, renamed ModelNew (super(Model, self) included)."""
    return re.sub(r"\bModel\b", "ModelNew", source)


@dataclass
class Row:
    problem: str
    stage: str  # "load", "task" (the reference failed), "evaluate", "ok"
    status: str = ""
    message: str = ""
    speedup: float | None = None
    speedup_low: float | None = None
    seconds: float = 0.0

    @property
    def called_faster(self) -> bool:
        return self.speedup_low is not None and self.speedup_low > 1.0


def selfcheck(paths: list[Path], config: EvalConfig, progress=None) -> list[Row]:
    from ..evaluate import evaluate
    rows = []
    config = config.replace(require_custom_kernel=False, use_cache=False)
    for i, path in enumerate(paths):
        started = time.monotonic()
        try:
            task = load_torch_task(path)
        except TaskError as exc:
            rows.append(Row(path.stem, "load", message=str(exc)))
            continue
        try:
            o = evaluate(task, reference_as_candidate(task.source), None, config)
        except (TaskError, HostError) as exc:
            rows.append(Row(path.stem, "task", message=str(exc),
                            seconds=time.monotonic() - started))
        else:
            rows.append(Row(path.stem, "ok" if o.ok else "evaluate", o.status.value, o.message,
                            o.speedup, o.speedup_low, time.monotonic() - started))
        if progress:
            progress(i + 1, len(paths), rows[-1])
    return rows
