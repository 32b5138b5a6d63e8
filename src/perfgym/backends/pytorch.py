"""The PyTorch backend: KernelBench-format tasks with Triton or CUDA (load_inline) candidates.

Each candidate runs in its own sandboxed Python process (harness/torch_worker.py), so a CUDA
fault or a hostile candidate cannot poison the evaluator. The worker saves both models' outputs;
the comparison happens here, in a process no candidate code has touched. Without a GPU, Triton
runs in interpreter mode and plain PyTorch on the CPU (timings labelled as CPU and never mixed
with GPU figures); CUDA sources are compile-checked with nvcc when it is there.
"""
from __future__ import annotations

import json
import math
import re
import secrets
import shutil
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from .. import sandbox
from ..checks.python_rules import PythonAudit, audit_python
from ..config import EvalConfig
from ..outcome import Outcome, Status, Timing
from ..sandbox_python import check_starts, sandbox_python

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[^\n]*\n(.*?)```", re.DOTALL)
# KernelBench's tolerance for fp32; half precision gets more room
TOLERANCE = {"float32": (1e-2, 1e-2), "float64": (1e-6, 1e-6), "float16": (5e-2, 5e-2),
             "bfloat16": (5e-2, 5e-2)}
IMPLAUSIBLE_SPEEDUP = 50.0  # flagged for a person to look at, not failed


class FormatError(ValueError):
    pass


def extract_python(text: str) -> str:
    """The last Python block that defines ModelNew (or the text itself)."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
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


def run_worker(problem_source: str, code: str, config: EvalConfig, workdir: Path,
               kernels: list[str]) -> tuple[sandbox.RunResult, dict | None]:
    (workdir / "problem.py").write_text(problem_source)
    (workdir / "candidate.py").write_text(code)
    worker = resources.files("perfgym.harness").joinpath("torch_worker.py").read_text()
    (workdir / "torch_worker.py").write_text(worker)
    device = device_for(config)
    manifest = {"device": device, "trials": config.trials,
                "seed": config.seed if config.seed is not None else secrets.randbits(31),
                "kernels": kernels, "flush_bytes": 256 << 20,
                "timing": {"warmup": max(1, config.warmup_min), "min_samples": config.min_samples,
                           "max_samples": config.max_samples, "max_time": config.max_time,
                           "cv_target": config.cv_target}}
    (workdir / "manifest.json").write_text(json.dumps(manifest))
    py = sandbox_python()
    env = dict(py.env)  # the cached one stays as it is
    env.update({"TRITON_INTERPRET": "0" if device == "cuda" else "1", "OMP_NUM_THREADS":
                str(config.n_threads), "TRITON_CACHE_DIR": str(workdir / ".triton"),
                "TORCH_EXTENSIONS_DIR": str(workdir / ".torch_extensions"),
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"})
    limits = sandbox.Limits(wall_seconds=config.torch_timeout, cpu_seconds=600,
                            address_space=64 << 30, file_size=1 << 30, processes=256,
                            output_bytes=256 << 10)
    result = sandbox.run([py.executable, "torch_worker.py", "manifest.json"], workdir, limits,
                         env=env, expose=py.expose)
    try:
        report = json.loads((workdir / "result.json").read_text())
    except (OSError, json.JSONDecodeError):
        report = None
    return result, report


def compare(workdir: Path, trial: dict, index: int) -> str | None:
    """None when the candidate's outputs match the reference's, else where they differ."""
    if len(trial["new"]) != len(trial["ref"]):
        return f"returned {len(trial['new'])} outputs, the reference {len(trial['ref'])}"
    for i, (new, ref) in enumerate(zip(trial["new"], trial["ref"])):
        if new["shape"] != ref["shape"]:
            return f"output {i} has shape {new['shape']}, the reference {ref['shape']}"
        got = np.load(workdir / f"new{index}_{i}.npy")
        want = np.load(workdir / f"ref{index}_{i}.npy")
        rtol, atol = TOLERANCE.get(ref["dtype"], (1e-2, 1e-2))
        if new["dtype"] != ref["dtype"] and TOLERANCE.get(new["dtype"], (0,))[0] > rtol:
            rtol, atol = TOLERANCE[new["dtype"]]  # a downcast output: judged at its precision
        bad = ~np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                          equal_nan=False)
        if bad.any():
            where = np.unravel_index(int(np.argmax(bad)), got.shape)
            return (f"output {i}{list(where)} = {got[where]:.6g} but the reference gives "
                    f"{want[where]:.6g} ({int(bad.sum())} of {bad.size} elements off; "
                    f"rtol {rtol:g}, atol {atol:g})")
    return None


def evaluate_torch(task, text: str, config: EvalConfig, machine: dict, started: float,
                   outcome) -> Outcome:
    """The whole protocol for one candidate. `outcome(status, message, details, **kw)` builds
    the Outcome with the common fields."""
    try:
        code = extract_python(text)
    except FormatError as exc:
        return outcome(Status.FORMAT_ERROR, str(exc))
    audit: PythonAudit = audit_python(code, config.require_custom_kernel)
    if audit.violation:
        status = (Status.COMPILE_ERROR if audit.violation.startswith("syntax error") else
                  Status.FORMAT_ERROR if "defines no class ModelNew" in audit.violation else
                  Status.LIBRARY_VIOLATION)
        return outcome(status, audit.violation, flags=audit.flags)
    workdir = sandbox.make_workdir("perfgym-torch-")
    try:
        device = device_for(config)
        if audit.cuda_sources and device != "cuda":
            ok, diag = nvcc_check(audit.cuda_sources, workdir)
            if not ok:
                return outcome(Status.COMPILE_ERROR, "the CUDA source does not compile (nvcc)",
                               diag, flags=audit.flags)
            return outcome(Status.RUNTIME_ERROR, "no GPU on this machine: the CUDA source "
                           "compiles (nvcc) but cannot run here", diag, flags=audit.flags)
        from ..lane import LANE
        with LANE.exclusive():
            result, report = run_worker(task.source, code, config, workdir, audit.kernels)
        return _judge(result, report, config, workdir, audit, device, outcome)
    finally:
        if not config.extra.get("keep_workdir"):
            shutil.rmtree(workdir, ignore_errors=True)


def _judge(result, report, config, workdir, audit, device, outcome) -> Outcome:
    flags = list(audit.flags)
    if result.timed_out:
        return outcome(Status.TIMEOUT, f"did not finish within {config.torch_timeout:g} s",
                       flags=flags)
    if report is None or result.killed_by:
        if report is None:
            check_starts()  # a host that cannot start the worker is not the candidate's fault
        why = f"crashed with {result.killed_by}" if result.killed_by else "the worker died"
        return outcome(Status.RUNTIME_ERROR, why, result.stderr[-2000:], flags=flags)
    if "error" in report:
        status = Status.COMPILE_ERROR if report["stage"] == "import" else Status.RUNTIME_ERROR
        where = "importing the candidate" if report["stage"] == "import" else "running it"
        return outcome(status, f"{report['error'].splitlines()[0][:300]} ({where})",
                       report.get("traceback", ""), flags=flags)
    for index, trial in enumerate(report["trials"]):
        if trial["input_modified"]:
            return outcome(Status.WRONG_ANSWER, "the candidate modified its inputs "
                           f"(trial {index + 1}); inputs are read-only", flags=flags)
        wrong = compare(workdir, trial, index)
        if wrong:
            return outcome(Status.WRONG_ANSWER, f"wrong answer in trial {index + 1} of "
                           f"{len(report['trials'])}: {wrong}", flags=flags)
    if config.require_custom_kernel:
        ran_own = any(t["launches"] > 0 for t in report["trials"])
        if device == "cuda" and not ran_own:
            ran_own = any(any(k in name for k in audit.kernels)
                          for name in report.get("cuda_kernels", []))
        if not ran_own:
            return outcome(Status.LIBRARY_VIOLATION, "decoy: none of the candidate's own "
                           f"kernels ({', '.join(audit.kernels)}) ran; the answer came from "
                           "PyTorch's kernels", flags=flags)
    new = Timing.from_samples(report["time_new"], 1, config.cv_target)
    ref = Timing.from_samples(report["time_ref"], 1, config.cv_target)
    speedup = ref.median / new.median if new.median > 0 else math.inf
    if speedup > IMPLAUSIBLE_SPEEDUP:
        flags.append("implausible_speedup")
    label = "GPU, CUDA events" if device == "cuda" else "CPU wall clock (not a GPU figure)"
    message = (f"{speedup:.2f}x the PyTorch reference ({new.median * 1e3:.3f} ms vs "
               f"{ref.median * 1e3:.3f} ms, median of {len(new.samples)}; CV "
               f"{new.trimmed_cv * 100:.1f}%; timed on {label})")
    if flags:
        message += f"; flags: {', '.join(flags)}"
    return outcome(Status.OK, message, timing=new, speedup=speedup, flags=flags,
                   device=device, reference_timing=ref)
