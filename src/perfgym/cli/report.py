"""`perfgym report`: plots and a Markdown summary of a run."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import UserError, _guard, app, console


@app.command("report")
@_guard
def report_cmd(run_dir: Path = typer.Argument(..., help="a run directory from `perfgym search`"),
               out: Optional[Path] = typer.Option(None, help="output directory (default: "
                                                  "RUN_DIR/report)")) -> None:
    """Write PNG plots and a Markdown summary of a run."""
    import sqlite3

    from ..report import write_plots, write_summary
    from ..store import RunStore
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
