"""The PyTorch backend: KernelBench-format tasks with Triton or CUDA (load_inline) candidates.

The candidate's process is compromised: it runs in a sandboxed worker of its own, the
reference in another, and this process (which no candidate code touches) makes the inputs
travel, compares the outputs and cross-checks the times (session.py says how). The static
rules below are a first filter for honest mistakes and obvious tricks, never the wall. Without
a GPU, Triton runs in interpreter mode and plain PyTorch on the CPU (timings labelled as CPU
and never mixed with GPU figures); CUDA sources are compile-checked with nvcc when it is there.
"""
from __future__ import annotations

import dataclasses
import math
import shutil
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from ... import sandbox
from .python_rules import PythonAudit, audit_python
from ...config import EvalConfig
from ...extract import fenced_blocks
from ...outcome import Outcome, Status, Timing
from ...sandbox_python import SandboxPython, check_starts, sandbox_python
from ...tasks.spec import TaskError
from .channel import Worker, WorkerDied, WorkerTimeout
from .kernel_source import KernelSourceError, kernel_module
from .warm import LIFETIME, Pair, Pool, active as active_pool, pair_key
from .session import (ReferenceDied, ReferenceFailed, Session, TimingResult, Verdict,
                      charge_replay, speedup_lower_bound)

IMPLAUSIBLE_SPEEDUP = 50.0  # flagged for a person to look at, not failed


class FormatError(ValueError):
    pass


def extract_python(text: str) -> str:
    """The last Python block that defines ModelNew (or the text itself)."""
    blocks = [(lang.lower(), body) for lang, body, _ in fenced_blocks(text)]  # linear time
    if blocks:
        defining = [b for lang, b in blocks if lang in ("", "python", "py") and
                    "class ModelNew" in b]
        if defining:
            return defining[-1]
        raise FormatError("no ```python code block defines class ModelNew")
    if "class ModelNew" in text:
        return text
    raise FormatError("the answer does not define class ModelNew")


@lru_cache(maxsize=1)
def cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def device_for(config: EvalConfig) -> str:
    return config.device or ("cuda" if cuda_available() else "cpu")


def nvcc_check(sources: list[str], workdir: Path) -> tuple[bool, str]:
    """Compile each CUDA source with nvcc (no GPU needed). (ok, diagnostics)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return True, "nvcc not found: CUDA sources not compile-checked"
    py = sandbox_python()
    try:
        from torch.utils.cpp_extension import include_paths
        includes = [f"-I{py.inside(p)}" for p in include_paths()]
    except ImportError:
        includes = []
    import sysconfig
    includes.append(f"-I{py.inside(sysconfig.get_paths()['include'])}")  # Python.h
    for i, src in enumerate(sources):
        (workdir / f"kernel{i}.cu").write_text(src)
        r = sandbox.run([nvcc, "-std=c++17", "-c", f"kernel{i}.cu", "-o", f"kernel{i}.o",
                         *includes], workdir,
                        sandbox.Limits(wall_seconds=180, cpu_seconds=300, address_space=16 << 30,
                                       file_size=256 << 20), expose=py.expose)
        if not r.ok:
            lines = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
            errors = [i for i, ln in enumerate(lines) if "error" in ln]
            keep = [ln for i, ln in enumerate(lines) if any(0 <= i - e <= 2 for e in errors)]
            return False, "\n".join((keep or lines)[:30])
    return True, ""


def worker_env(config: EvalConfig, workdir: Path, device: str,
               py: SandboxPython | None = None) -> dict[str, str]:
    env = dict((py or sandbox_python()).env)  # the cached one stays as it is
    env.update({"TRITON_INTERPRET": "0" if device == "cuda" else "1",
                "OMP_NUM_THREADS": str(config.n_threads),
                # two workers share the cores: threads that spin after a parallel region would
                # steal them from the other side's timed call
                "OMP_WAIT_POLICY": "PASSIVE",
                "TRITON_CACHE_DIR": str(workdir / ".triton"),
                "TORCH_EXTENSIONS_DIR": str(workdir / ".torch_extensions"),
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"})
    return env


def worker_limits(config: EvalConfig) -> sandbox.Limits:
    # no output files any more: outputs travel over the parent's pipe, whatever their size
    return sandbox.Limits(wall_seconds=config.torch_timeout + 5, cpu_seconds=1200,
                          address_space=64 << 30, file_size=256 << 20, processes=256,
                          output_bytes=256 << 10)


def check_statically(code: str, config: EvalConfig, outcome) -> tuple[PythonAudit, str] | Outcome:
    """The static rules and, for CUDA sources without a GPU, nvcc: (the audit, the device the
    session will run on), or the Outcome of a candidate that stops here.
    `outcome(status, message, details, **kw)` builds the Outcome with the common fields."""
    enforce = config.extra.get("static_rules", True)  # off only to test the wall behind them
    audit: PythonAudit = audit_python(code, config.require_custom_kernel, enforce=enforce)
    if audit.violation:
        status = (Status.COMPILE_ERROR if audit.violation.startswith("syntax error") else
                  Status.FORMAT_ERROR if "defines no class ModelNew" in audit.violation else
                  Status.LIBRARY_VIOLATION)
        return outcome(status, audit.violation, flags=audit.flags)
    device = device_for(config)
    # (an answer with Triton kernels is run: its load_inline, if it ever runs, fails there,
    # and one that never runs leaves the Triton kernels to be judged by their replay)
    if audit.cuda_sources and device != "cuda" and not audit.triton_kernels:
        workdir = sandbox.make_workdir("perfgym-nvcc-")
        try:
            ok, diag = nvcc_check(audit.cuda_sources, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if not ok:
            return outcome(Status.COMPILE_ERROR, "the CUDA source does not compile (nvcc)",
                           diag, flags=audit.flags)
        return outcome(Status.RUNTIME_ERROR, "no GPU on this machine: the CUDA source "
                       "compiles (nvcc) but cannot run here", diag, flags=audit.flags)
    return audit, device


# On the CPU, a pair of worker processes carries a bias of its own that the paired calls inside
# it cannot see: copies of KernelBench level-1 references measured 0.25x to 2.8x themselves
# under load (7 of 100 "faster" at 99.9%), and the same problem flipped between runs. So a
# "faster" finding is replicated in a fresh pair of processes and the smaller bound kept.
CPU_REPLICATES = 2


def run_session(task, code, config, audit, device, outcome) -> Outcome:
    """Workers started, answers checked, both models timed (in the exclusive lane)."""
    flags = list(audit.flags)
    runs: list[tuple[TimingResult, dict]] = []
    while True:
        # (a replicate is there to rule out a pair of processes' own bias: fresh workers)
        result = _one_session(task, code, config, audit, device, outcome, flags,
                              warm=None if runs else active_pool())
        if isinstance(result, Outcome):  # a verdict: it stands whichever replicate found it
            return result
        runs.append(result)
        timing = result[0]
        if (device != "cpu" or config.kernelbench or len(runs) >= CPU_REPLICATES
                or speedup_lower_bound(timing.ref, timing.new) <= 1):
            break
    return _timed_outcome([t for t, _ in runs], config, device, flags, runs[0][1], outcome)


def _one_session(task, code, config, audit, device, outcome, flags, warm: Pool | None = None):
    """Start the workers (three, and the replayer once the trials pass), check, time; a
    TimingResult and the shrunk sizes, or the Outcome of a verdict. With a `warm` pool the
    problem and reference workers come from it when it has them, and go back to it when they
    are idle after the session (warm.py)."""
    from ...lane import LANE
    # every answer's kernels are replayed (a load_inline that ran is refused there: no replay
    # can hold its host code to the rules, and no evidence earns no pay)
    check_kernels = config.require_custom_kernel
    roles = ("problem", "ref", "cand") + (("replayer",) if check_kernels else ())
    dirs = [sandbox.make_workdir(f"perfgym-torch-{role}-") for role in roles]
    deadline = time.monotonic() + config.torch_timeout
    limits, py = worker_limits(config), sandbox_python()
    key = pair_key(task, device, config)
    pair = warm.take(key, config.torch_timeout) if warm else None
    taken = pair is not None  # (else, with a pool, the pair started here may join it)
    began = time.monotonic()
    start = _starter(config, device, py, limits, warm, deadline)
    # the replayer's kernel checks: forked by the parent from the batch's "checks" template,
    # which has imported Triton's front end (template.py); elsewhere each check is a process
    # the replayer starts
    check_env = {**worker_env(config, Path("/"), device, py), "TRITON_INTERPRET": "0"}
    checks = warm.template(check_env, py, kind="checks") if warm and check_kernels else None

    problem_file = {"problem.py": task.source}
    problem = cand = ref = replayer = None
    shrunk: dict = {}
    idle = None  # whether the pair answered its ping after the session (asked once)
    try:
        kernels = kernel_module(code) if check_kernels else ""
        with LANE.shared():  # start-up and correctness time nothing
            if taken:
                problem, ref, shrunk = pair.problem, pair.reference, pair.shrunk
                problem.deadline = ref.deadline = deadline
            else:
                problem = start("problem", dirs[0], problem_file,
                                {"input_budget": config.input_budget})
            cand = start("candidate", dirs[2], {"candidate.py": code},
                         {"count_extensions": bool(audit.cuda_sources)})
            if ref is None and not config.input_budget:  # no sizes to wait for: all three
                ref = start("reference", dirs[1], problem_file, {})  # start together
            session = Session(problem, ref, cand, config, kernelbench=config.kernelbench)
            if not taken:
                shrunk = _checked(session.problem_ready)
            if ref is None:
                ref = session.ref = start("reference", dirs[1], problem_file, {"sizes": shrunk})
            if warm and not taken:
                pair = Pair(problem, ref, dirs[:2], shrunk, began)
            _checked(lambda: session.ready(reference_ready=taken))
            session.correctness(5 if config.kernelbench else config.trials)
            if check_kernels:  # before timing: a decoy is not worth timing
                # started only now: most answers (and attacks) end in the trials, and a fourth
                # torch import beside them costs a 2-core machine about a second each
                replayer = session.replayer = start(
                    "replayer", dirs[3], {}, {"checks_by_parent": checks is not None})
                if checks is not None:
                    session.check_kernel = lambda request: checks.check_kernel(
                        kernels, request, check_env)
                _replayer_ready(replayer)
                session.kernel_program(kernels, cuda=bool(audit.cuda_sources))
        with LANE.exclusive():
            timing = session.time()
            if check_kernels:
                timing = charge_replay(timing, session.replay_seconds(), flags)
    except KernelSourceError as exc:
        return outcome(Status.LIBRARY_VIOLATION, str(exc), flags=flags)
    except Verdict as v:
        return outcome(Status(v.status), v.message, v.details, flags=flags)
    except ReferenceFailed as exc:
        raise TaskError(f"{task.name}: {exc}") from None
    except WorkerTimeout:
        return outcome(Status.TIMEOUT, f"did not finish within {config.torch_timeout:g} s "
                       "(import, trials and timing together)", flags=flags)
    except WorkerDied as exc:  # (a pooled reference that answers a ping did not die)
        idle = pair is not None and pair.idle()
        return _died(ref, cand, str(exc), flags, outcome, ref_alive=idle)
    finally:
        _release(warm, key, pair, idle, (problem, ref), (cand, replayer), dirs, config)
    return timing, shrunk


def _starter(config, device, py, limits, warm: Pool | None, deadline: float):
    """The function that starts each worker of one session, all with the session's deadline."""
    # pooled workers live through the batch: their sandbox's wall limit is the pool's
    pooled_limits = dataclasses.replace(limits, wall_seconds=LIFETIME,
                                        cpu_seconds=max(limits.cpu_seconds, 2 * LIFETIME))

    def start(role: str, workdir: Path, files: dict, options: dict) -> Worker:
        lim = pooled_limits if warm and role in ("problem", "reference") else limits
        env = worker_env(config, workdir, device, py)
        # in a batch every worker is forked from the batch's template, which has imported
        # torch already (template.py): the candidate's and the replayer's for one session,
        # the problem's and the reference's for the batch (one import where there were three)
        template = warm.template(worker_env(config, Path("/"), device, py), py) \
            if warm else None
        return Worker(role, workdir, files, {"device": device, **options}, lim, py, env,
                      deadline, template=template)

    return start


def _release(warm: Pool | None, key, pair: Pair | None, idle: bool | None,
             pair_workers: tuple, own_workers: tuple, dirs: list[Path], config) -> None:
    """The end of a session: the problem and reference workers (`pair_workers`) go back to the
    warm pool when they answered a ping after it (`idle`: asked here if it is still None);
    every other worker is ended, and every work directory not kept with the pair removed."""
    if idle is None:
        idle = pair is not None and pair.idle()
    kept = warm is not None and idle
    if kept:
        warm.give(key, pair)
    workers = [w for w in (*pair_workers, *own_workers)
               if w is not None and not (kept and w in pair_workers)]
    for w in workers:  # all asked first: they end together
        w.ask_to_quit()
    for w in workers:
        w.close()
    if not config.extra.get("keep_workdir"):
        for d in {*dirs, *(pair.dirs if pair else ())}:
            if not (kept and d in pair.dirs):
                shutil.rmtree(d, ignore_errors=True)


def _replayer_ready(replayer: Worker) -> None:
    """The replayer runs the gym's code only: its failing to start is the host's fault."""
    try:
        reply = replayer.header()
    except WorkerDied:
        check_starts()
        raise ReferenceDied("the replayer worker died while starting") from None
    if "error" in reply:
        raise ReferenceFailed(f"the replayer cannot start: {reply['error'][:300]}")


def _checked(step):
    try:
        return step()
    except ReferenceDied:
        check_starts()  # a host that cannot start a worker is not the candidate's fault
        raise


def _died(ref, cand, why: str, flags: list[str], outcome, ref_alive: bool = False) -> Outcome:
    for w in (cand,) if ref_alive else (ref, cand):
        if w is not None:
            w.close()
    if (not ref_alive and ref is not None and ref.result is not None and ref.result.killed_by
            and (cand.result is None or not cand.result.killed_by)):
        raise ReferenceFailed(f"the reference worker died ({ref.result.killed_by})")
    r = cand.result
    details = r.stderr[-2000:] if r else ""
    if r is not None and r.killed_by:
        why = f"crashed with {r.killed_by}"
    elif r is not None and r.returncode is not None:
        why = f"the candidate's worker exited with status {r.returncode} ({why})"
    return outcome(Status.RUNTIME_ERROR, f"the candidate's worker stopped answering: {why}",
                   details, flags=flags)


def _timed_outcome(timings: list[TimingResult], config, device, flags, shrunk,
                   outcome) -> Outcome:
    timing = timings[0]
    if config.kernelbench:  # KernelBench reports the mean of its timed runs
        new_t, ref_t = float(np.mean(timing.new)), float(np.mean(timing.ref))
    else:
        new_t, ref_t = float(np.median(timing.new)), float(np.median(timing.ref))
    new = Timing.from_samples(timing.new, 1, config.median_precision)
    ref = Timing.from_samples(timing.ref, 1, config.median_precision)
    speedup = ref_t / new_t if new_t > 0 else math.inf
    lows = [speedup_lower_bound(t.ref, t.new) for t in timings]
    low = min(lows)
    if speedup > IMPLAUSIBLE_SPEEDUP:
        flags.append("implausible_speedup")
    label = "GPU, CUDA events" if device == "cuda" else "CPU wall clock (not a GPU figure)"
    stat = "mean" if config.kernelbench else "median"
    message = (f"{speedup:.2f}x the PyTorch reference ({new_t * 1e3:.3f} ms vs "
               f"{ref_t * 1e3:.3f} ms, {stat} of {len(timing.new)} paired calls; "
               f"{'faster' if low > 1 else 'not faster'} at 99.9% confidence"
               + (f" in each of {len(timings)} pairs of worker processes (bounds "
                  + ", ".join(f"{x:.2f}x" for x in lows) + ")" if len(timings) > 1 else "")
               + f"; timed on {label})")
    if shrunk:
        message += "; sizes reduced: " + ", ".join(f"{k}={v}" for k, v in shrunk.items())
    if flags:
        message += f"; flags: {', '.join(flags)}"
    details = (f"parent clock cross-check: channel overhead {timing.channel_overhead * 1e3:.3f}"
               f" ms (reference), {timing.candidate_overhead * 1e3:.3f} ms (candidate); "
               f"candidate calls as seen by the parent (ms): "
               + " ".join(f"{p * 1e3:.3f}" for p in timing.parent_new[:20]))
    return outcome(Status.OK, message, details, timing=new, speedup=speedup, speedup_low=low,
                   flags=flags, device=device, reference_timing=ref)
