"""`perfgym tasks`: list, show, create, import and self-check tasks."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .. import machine as machine_mod
from ..backends import backend_for
from ..config import EvalConfig
from ..tasks import builtin_names, format_size, get_task
from .common import UserError, _check_timeout, _guard, app, console

tasks_app = typer.Typer(help="List and inspect tasks.", invoke_without_command=True)
app.add_typer(tasks_app, name="tasks")


@tasks_app.callback()
@_guard
def tasks_list(ctx: typer.Context,
               as_json: bool = typer.Option(False, "--json", help="print as JSON")) -> None:
    """List the built-in tasks, with this machine's naive/expert figures from `bench-suite`."""
    if ctx.invoked_subcommand:
        return
    from ..suite import listing_figures
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
    from ..tasks.torch_task import builtin_gpu_names
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
    from ..prompts import generate_prompt
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
    from ..tasks.scaffold import scaffold
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
    from ..tasks.pareval import import_pareval
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
    from ..tasks.selfcheck import selfcheck
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
