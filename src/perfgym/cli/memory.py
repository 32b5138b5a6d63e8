"""`perfgym memory`: the kernel memory search prompts can show."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..tasks import format_size, get_task
from .common import UserError, _guard, app, console
from .eval_cmd import _read


memory_app = typer.Typer(help="The kernel memory: verified kernels that search prompts for "
                         "other tasks can show (see README, perfgym memory).",
                         no_args_is_help=True)
app.add_typer(memory_app, name="memory")
_MEMORY_HELP = "the memory file (default: memory.sqlite in the perfgym cache)"


def _open_memory(path: Optional[Path], must_exist: bool = True):
    from ..memory import KernelMemory, default_path
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

    from ..memory import sources
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
    from ..memory import terms
    from ..memory.store import task_terms
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
