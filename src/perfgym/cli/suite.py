"""`perfgym bench-suite`: every task's naive and expert kernels as a table."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from .. import machine as machine_mod
from ..config import EvalConfig
from ..tasks import builtin_names, format_size, get_task
from .common import _check_timeout, _guard, app, console, err_console


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
    from ..suite import blas_comparison, run_suite, save_for_listing, write_report
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
