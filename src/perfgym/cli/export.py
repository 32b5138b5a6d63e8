"""`perfgym export`: the task set as another RL framework's training data."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import UserError, _guard, app, console

export_app = typer.Typer(no_args_is_help=True, help="The task set as another framework's data.")
app.add_typer(export_app, name="export")


@export_app.command("verl")
@_guard
def export_verl(out: Path = typer.Option(Path("perfgym_train.parquet"), "--out", "-o",
                                         help="the Parquet file to write"),
                task: Optional[str] = typer.Option(None, help="tasks, comma-separated "
                                                   "(default: every built-in CPU task)"),
                op: str = typer.Option("improve", help="improve (the naive kernel shown, as "
                                       "perfgym's GRPO asks) or generate"),
                sizes: str = typer.Option("default", help="size policy the reward judges at: "
                                          "default, train, heldout, all, smallest, or one size "
                                          "('N=100000')"),
                stage: Optional[int] = typer.Option(None, help="optimization stage 1-6"),
                opened: bool = typer.Option(False, "--opened", help="the rollout prefills "
                                            "extra_info.opening and the model writes the body"),
                ) -> None:
    """Write verl's RL Parquet (chat prompt, data_source, reward_model, extra_info); OpenRLHF
    reads it too (--data.input_key prompt --data.label_key label)."""
    from ..integrations.dataset import rows, write_parquet
    if out.is_dir():
        raise UserError(f"--out {out} is a directory; give a .parquet file")
    names = [t.strip() for t in task.split(",") if t.strip()] if task else None
    if task is not None and not names:
        raise UserError("--task is empty: give task names, e.g. --task dot,dgemv")
    records = rows(names, op=op, sizes=sizes, stage=stage, opened=opened)
    try:
        write_parquet(records, out)
    except RuntimeError as exc:  # pyarrow missing
        raise UserError(str(exc)) from None
    console.print(f"wrote {len(records)} prompts to {out}", highlight=False)
