"""The local executor: builds in parallel, timing in one exclusive lane, results in order.

A request that raises does not take the batch with it: it gets a HOST_ERROR Outcome (no verdict
on the candidate; reward schemes refuse it) and the others go on. A fault of the task itself (a
TaskError: a reference too slow at the size asked, say) is the caller's to fix: its request gets
no Outcome, the others finish, and then the first such error is raised. An interruption (Ctrl-C, an
`on_result` that raises) stops the batch: builds not started never start, and every work
directory a finished build made is removed before the exception goes on.
"""
from __future__ import annotations

import contextvars
import os
import queue
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..config import EvalConfig
from ..backends import backend_for
from ..backends.torch.warm import batch as torch_batch
from ..evaluate import Prepared, baseline_key, finish, measure, prepare, recent_baseline
from ..outcome import Outcome, Status
from ..tasks import Task, TaskError


@dataclass
class Request:
    task: Task
    text: str  # C source or a model's whole answer
    size: dict[str, int] | None = None
    config: EvalConfig = field(default_factory=EvalConfig)
    tag: Any = None  # the caller's id for this request; not used here


def evaluate_many(requests: Sequence[Request], workers: int | None = None,
                  progress: bool = False,
                  on_result: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
    """Evaluate every request; Outcomes come back in request order.

    Up to `workers` candidates build at once (default: one per core); timed runs happen one at a
    time while no build runs, so no two measurements share the machine.
    """
    if not requests:
        return []
    workers = workers or len(os.sched_getaffinity(0))
    # Baselines first, once per (task, size, config): every speedup needs one, and under
    # use_cache=False the batch shares the one it timed, or one timed in the last seconds
    # (evaluate.recent_baseline): no re-timing per candidate.
    bases: dict[tuple, Outcome] = {}
    # a baseline that met a task fault (its reference too slow at the size, the size too large
    # for memory): every request of that key is the same task fault, told without a build
    base_faults: dict[tuple, TaskError] = {}

    def base_key(r: Request) -> tuple:
        return baseline_key(r.task, r.size, r.config)

    for r in requests:
        key = base_key(r)
        # (a backend without a separate baseline times its reference in the same session)
        if r.config.compare_baseline and backend_for(r.task).separate_baseline \
                and key not in bases:
            try:
                bases[key] = recent_baseline(r.task, r.size or r.task.default_size, r.config)
            except TaskError as exc:
                base_faults[key] = exc
            except Exception:  # each of its requests meets it again in `finish`, recorded there
                pass

    results: list[Outcome | None] = [None] * len(requests)
    task_faults: list[TaskError] = []
    ready: queue.Queue = queue.Queue()
    bar = _Progress(len(requests)) if progress else None

    def build_one(i: int) -> None:
        r = requests[i]
        started = time.monotonic()
        if (fault := base_faults.get(base_key(r))) is not None:
            ready.put((i, fault))
            return
        try:
            ready.put((i, prepare(r.task, r.text, r.size, r.config)))
        except TaskError as exc:
            ready.put((i, exc))
        except Exception as exc:
            ready.put((i, host_error(r, exc, started)))
        except BaseException as exc:  # surfaced by the lane loop below
            ready.put((i, exc))

    def record(i: int, outcome: Outcome) -> None:
        results[i] = outcome
        if bar:
            bar.advance(outcome)
        if on_result:
            on_result(i, outcome)

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="perfgym-build")
    # PyTorch tasks: one problem and one reference worker serve the batch (torch/warm.py)
    warm = torch_batch() if any(backend_for(r.task).language == "torch" for r in requests) \
        else nullcontext()
    with warm:
        try:
            for i in range(len(requests)):  # (the caller's lane bound goes with each build)
                pool.submit(contextvars.copy_context().run, build_one, i)
            for _ in range(len(requests)):
                i, item = ready.get()
                if isinstance(item, TaskError):
                    task_faults.append(item)
                    continue
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, Prepared):  # measure takes the lane for what it times
                    started = time.monotonic()
                    try:
                        # (measure removes its work directory)
                        base = bases.get(base_key(requests[i]))
                        item = finish(item, measure(item, base), base)
                    except TaskError as exc:
                        task_faults.append(exc)
                        continue
                    except Exception as exc:
                        item = host_error(requests[i], exc, started)
                record(i, item)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # the builds under way finish...
            _discard(ready)  # ...and what they made goes
            raise
        finally:
            pool.shutdown(wait=True)
            if bar:
                bar.close()
    if task_faults:
        raise task_faults[0]
    return results  # type: ignore[return-value]


def host_error(r: Request, exc: BaseException, started: float) -> Outcome:
    """The Outcome of a request whose evaluation raised: the host's failure, not a verdict."""
    text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    return Outcome(status=Status.HOST_ERROR, task=r.task.name,
                   sizes=dict(r.size or r.task.default_size),
                   message=f"the host failed to evaluate this candidate ({text}); not a verdict "
                           "on it", details="".join(traceback.format_exception(exc))[-4000:],
                   stage=r.config.stage, config=r.config.to_dict(),
                   elapsed=time.monotonic() - started)


def _discard(ready: queue.Queue) -> None:
    """Remove the work directories of prepared candidates that will not be measured."""
    while True:
        try:
            _, item = ready.get_nowait()
        except queue.Empty:
            return
        if isinstance(item, Prepared):
            (item.backend or backend_for(item.task)).cleanup(item)


class _Progress:
    """A rich progress bar with the running status mix."""

    def __init__(self, total: int) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.progress = Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.description}"),
                                 transient=False)
        self.task = self.progress.add_task("", total=total)
        self.progress.start()

    def advance(self, outcome: Outcome) -> None:
        with self.lock:
            self.counts[outcome.status.value] = self.counts.get(outcome.status.value, 0) + 1
            mix = " ".join(f"{k}:{v}" for k, v in sorted(self.counts.items()))
            self.progress.update(self.task, advance=1, description=mix)

    def close(self) -> None:
        self.progress.stop()
