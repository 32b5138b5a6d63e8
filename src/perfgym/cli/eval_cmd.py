"""`perfgym eval`: score kernels, one verdict per kernel and size."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from .. import sandbox
from ..backends import backend_for
from ..config import EvalConfig
from ..executors import Request, evaluate_many
from ..multisize import aggregate
from ..outcome import Outcome
from ..rewards import SCHEMES, score
from ..tasks import format_size, get_task, parse_size
from .common import (MAX_CANDIDATE_BYTES, PROFILERS_HELP, PROFILE_HELP, UserError, _check_timeout,
                     _guard, app, console)


@app.command("eval")
@_guard
def eval_cmd(
    files: list[Path] = typer.Argument(None, help="C files or model answers (text with a ```c "
                                       "block); '-' reads stdin. None: the task's own naive and "
                                       "expert kernels."),
    task: str = typer.Option("dgemm", "--task", "-t", help="built-in task name or task directory"),
    stage: Optional[int] = typer.Option(None, help="optimization stage 1-6 (seed Table I)"),
    opt: str = typer.Option("O3", help="optimization level: O0 O1 O2 O3 Ofast Os"),
    size: list[str] = typer.Option(None, help="size: '256' or 'M=128,N=96,K=200'; repeatable"),
    sizes: str = typer.Option("default", help="size set: default, train, heldout, all, "
                              "smallest"),
    verify: Optional[str] = typer.Option(None, help="full or sampled (105 points); default: the "
                                         "task's"),
    threads: Optional[int] = typer.Option(None, help="OpenMP threads (default: all cores)"),
    cc: str = typer.Option("gcc", help="C compiler (gcc or clang)"),
    march: str = typer.Option("native", help="-march value"),
    timeout: Optional[float] = typer.Option(None, help="seconds a run may take (default: 8 for "
                                            "C kernels, 180 for a PyTorch task's whole "
                                            "evaluation)"),
    reward: str = typer.Option("tiered", help=f"reward scheme: {', '.join(SCHEMES)}"),
    strict_stages: bool = typer.Option(False, help="also enforce the cache-blocking detector"),
    allow_torch: bool = typer.Option(False, "--allow-torch", help="PyTorch tasks: score plain "
                                     "PyTorch candidates too (no custom kernel required)"),
    kernelbench: bool = typer.Option(False, "--kernelbench", help="PyTorch tasks: KernelBench's "
                                     "protocol (seed 42, 5 trials, mean of 100 timed calls) to "
                                     "compare with published numbers"),
    input_budget: Optional[int] = typer.Option(None, help="PyTorch tasks: shrink the problem's "
                                               "sizes until no tensor has more elements than "
                                               "this"),
    no_cache: bool = typer.Option(False, "--no-cache", help="re-run even identical candidates"),
    ray_address: Optional[str] = typer.Option(None, help="evaluate on this Ray cluster's "
                                              "benchmark nodes"),
    as_json: bool = typer.Option(False, "--json", help="print Outcomes as JSON"),
    profile: bool = typer.Option(False, "--profile", help=PROFILE_HELP),
    profilers: Optional[str] = typer.Option(None, help=PROFILERS_HELP),
) -> None:
    """Evaluate kernels on a task and print a verdict per kernel and size."""
    sandbox.sweep_stale()  # what killed drivers left behind
    t = get_task(task)
    _check_timeout("--timeout", timeout)
    if input_budget is not None and input_budget < 1:
        raise UserError(f"--input-budget must be at least 1 element, not {input_budget}")
    backend = backend_for(t)
    given = {"--allow-torch": allow_torch, "--kernelbench": kernelbench,
             "--input-budget": input_budget is not None}
    if stray := [k for k, v in given.items() if v and k not in backend.own_flags]:
        raise UserError(f"{', '.join(stray)}: not for {t.name!r}, a {backend.label} task")
    times = {backend.timeout_field(): timeout} if timeout is not None else {}
    config = EvalConfig(opt=opt, stage=stage, verify=verify, threads=threads, compiler=cc,
                        march=march, strict_stages=strict_stages, use_cache=not no_cache,
                        require_custom_kernel=not allow_torch, kernelbench=kernelbench,
                        input_budget=input_budget, profile=_profile(profile, profilers),
                        **times)
    if reward not in SCHEMES:
        raise UserError(f"reward scheme {reward!r} is not one of {', '.join(SCHEMES)}")
    if backend.task_format == "toml" and not ray_address:  # the toolchain is this machine's
        _check_toolchain(cc, march, threads)
    size_list = [parse_size(s, t) for s in size] if size else t.sizes(sizes)
    if backend.task_format == "toml" and not size:
        for s in size_list:  # a task's own sizes, bounded here too rather than mid-batch
            t.check_size(s)
    if files:
        named = [(str(f), _read_stdin() if str(f) == "-" else _read(f), config) for f in files]
    else:
        named = [(f"{t.name}/{backend.baseline_label}", *backend.baseline_candidate(t, config))]
        if t.expert:
            named.append((f"{t.name}/expert", t.expert.read_text(), config))
    requests = [Request(t, text, s, cfg, tag=(name, s)) for name, text, cfg in named
                for s in size_list]
    run_many = evaluate_many
    if ray_address:
        from ..executors.ray_executor import RayExecutor
        run_many = RayExecutor(ray_address).evaluate_many
    outcomes = run_many(requests, progress=not as_json and len(requests) > 1
                        and sys.stderr.isatty())
    rewards = _rewards(reward, requests, outcomes)
    if as_json:
        out = []
        for r, o, w in zip(requests, outcomes, rewards):
            out.append({"file": r.tag[0], "reward": w, **o.to_dict()})
        print(json.dumps(out if len(out) > 1 else out[0], indent=2))
    else:
        _print_outcomes(requests, outcomes, rewards, reward)
    if failed := [o for o in outcomes if o.status.value == "HOST_ERROR"]:
        raise UserError(f"{len(failed)} of {len(outcomes)}: {failed[0].message}; fix the host "
                        "and rerun")


def _check_toolchain(cc: str, march: str, threads: int | None) -> None:
    """What would fail every candidate alike is the user's to fix, said once: a compiler that is
    missing or refuses -march, more threads than the sandbox lets a kernel start."""
    import os
    import shutil
    import subprocess
    path = shutil.which(cc)
    if path is None:
        raise UserError(f"compiler {cc!r} not found: install it or pass --cc gcc (or clang)")
    if march != "native":
        r = subprocess.run([path, f"-march={march}", "-x", "c", "-fsyntax-only", "-"], input="",
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["refused"])[0]
            raise UserError(f"--march {march}: {cc} refuses it ({why}); pass a CPU name such "
                            "as native, x86-64-v3 or skylake")
    cores = os.cpu_count() or 1
    if threads is not None and threads > 4 * cores:
        raise UserError(f"--threads {threads}: at most {4 * cores} (four per core) on this "
                        "machine")


def _profile(profile: bool, providers: str | None) -> tuple[str, ...]:
    from ..profiling import parse
    return parse(providers) if providers is not None else parse("default") if profile else ()


def render_profile(profile) -> list[str]:
    from ..profiling import render
    return render(profile)


def _read(path: Path) -> str:
    if path.is_dir():
        raise UserError(f"{path} is a directory; give a .c file or a model answer")
    try:
        with path.open("rb") as f:  # no more than the limit, whatever the file (or FIFO) holds
            data = f.read(MAX_CANDIDATE_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return _candidate_text(str(path), data)


def _read_stdin() -> str:
    return _candidate_text("stdin", sys.stdin.buffer.read(MAX_CANDIDATE_BYTES + 1))


def _candidate_text(name: str, data: bytes) -> str:
    if len(data) > MAX_CANDIDATE_BYTES:
        raise UserError(f"{name} is over {MAX_CANDIDATE_BYTES >> 20} MiB; a candidate is one "
                        "kernel or one model answer")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise UserError(f"{name} is not a text file") from None
    if Path(name).suffix in (".cpp", ".cc", ".cxx") and "```" not in text:
        text = f"```cpp\n{text}\n```"  # a C++ file is judged as C++ on any C task
    return text


def _rewards(scheme: str, requests: list[Request], outcomes: list[Outcome]) -> list[float]:
    # Group-normalized rewards compare kernels of the same size only.
    rewards = [0.0] * len(outcomes)
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault(tuple(sorted((r.size or r.task.default_size).items())), []).append(i)
    for idx in groups.values():
        for i, w in zip(idx, score(scheme, [outcomes[i] for i in idx])):
            rewards[i] = w
    return rewards


def _print_outcomes(requests: list[Request], outcomes: list[Outcome], rewards: list[float],
                    scheme: str) -> None:
    by_file: dict[str, list[int]] = {}
    for i, r in enumerate(requests):
        by_file.setdefault(r.tag[0], []).append(i)
    for name, idx in by_file.items():
        console.rule(f"[bold]{name}[/]")
        for i in idx:
            o = outcomes[i]
            colour = "green" if o.ok else "red"
            head = f"[bold {colour}]{o.status.value}[/] {format_size(o.sizes)}"
            console.print(f"{head}  {o.message}", highlight=False)
            if o.ok:
                t = o.timing
                rate = f"  {o.gbps:.2f} GB/s" if o.gbps is not None else ""
                console.print(f"    median {t.median * 1e3:.3f} ms  min {t.minimum * 1e3:.3f} ms  "
                              f"mean {t.mean * 1e3:.3f} ms  CV {t.cv * 100:.1f}% (all calls)  "
                              f"({len(t.samples)} samples, {t.warmups} warm-ups){rate}",
                              style="dim", highlight=False)
            elif o.details and o.status.value != "HOST_ERROR":  # that one is a traceback
                for line in o.details.splitlines()[:12]:
                    console.print(f"    {line}", style="dim", highlight=False, markup=False)
            extra = f"reward ({scheme}) {rewards[i]:.2f}"
            if o.techniques:
                extra += f"  techniques: {', '.join(o.techniques)}"
            if o.cached:
                extra += "  (cached)"
            console.print(f"    {extra}", style="dim", highlight=False)
            for line in render_profile(o.profile):
                console.print(f"    {line}", highlight=False, markup=False)
        if len(idx) > 1:
            folded = aggregate([outcomes[i] for i in idx])
            colour = "green" if folded.ok else "red"
            console.print(f"[bold {colour}]{folded.message}[/]", highlight=False, markup=True)
