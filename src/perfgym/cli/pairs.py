"""`perfgym pairs`: slow/fast kernel pair datasets."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import UserError, _guard, app, console


pairs_app = typer.Typer(help="Slow/fast kernel pair datasets.", no_args_is_help=True)
app.add_typer(pairs_app, name="pairs")


@pairs_app.command("starter")
@_guard
def pairs_starter(out: Path = typer.Option(Path("pairs/starter.jsonl")),
                  filter_: bool = typer.Option(True, "--filter/--no-filter",
                                               help="keep only verified, faster pairs")) -> None:
    """The starter set: the suite's naive/expert kernels and our intermediate variants."""
    from ..train.pairs import filter_pairs, starter_set, write_pairs
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
    from ..train.pairs import build_from_tree, write_pairs
    if not root.is_dir():
        raise UserError(f"{root} is not a directory")
    n = write_pairs(out, build_from_tree(root, clean_code))
    console.print(f"wrote {n} pairs to {out}", highlight=False)


@pairs_app.command("clean")
@_guard
def pairs_clean(source: Path = typer.Argument(...), out: Path = typer.Option(...)) -> None:
    """Keep only the kernel parts of each pair (drop main, I/O, timing, argument parsing)."""
    from dataclasses import replace as dc_replace

    from ..train.pairs import clean, read_pairs, write_pairs
    cleaned = [dc_replace(p, slow=clean(p.slow, p.language), fast=clean(p.fast, p.language))
               for p in read_pairs(source)]
    n = write_pairs(out, [p for p in cleaned if p.slow.strip() and p.fast.strip()])
    console.print(f"wrote {n} pairs to {out}", highlight=False)


@pairs_app.command("filter")
@_guard
def pairs_filter(source: Path = typer.Argument(...), out: Path = typer.Option(...),
                 min_speedup: float = typer.Option(1.0)) -> None:
    """Keep pairs whose kernels both verify and whose fast kernel is faster (CPU tasks)."""
    from ..train.pairs import filter_pairs, read_pairs, write_pairs
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
    from ..train.pairs import read_pairs, split, write_pairs
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

    from ..policies import PolicyError, make_policy
    from ..train.pairs import augment, read_pairs, write_pairs
    try:
        pol = make_policy(policy, model=model, base_url=base_url,
                          api_key=os.environ.get("OPENAI_API_KEY"), model_path=model_path,
                          path=replay)
        new = augment(read_pairs(source), pol, samples)
    except PolicyError as exc:
        raise UserError(str(exc)) from None
    n = write_pairs(out, new)
    console.print(f"wrote {n} new pairs to {out}", highlight=False)


@pairs_app.command("from-runs")
@_guard
def pairs_from_runs_cmd(
        run_dirs: list[Path] = typer.Argument(..., help="search run directories"),
        out: Path = typer.Option(Path("pairs/from-runs.jsonl"), "--out", "-o"),
        exclude: str = typer.Option("", help="comma-separated tasks never to take pairs from "
                                    "(an experiment's held-out tasks)"),
        min_speedup: float = typer.Option(
            None, help="least speedup of a child over its parent (default 1.1: the noise of a "
                       "C kernel's median)"),
        from_naive: bool = typer.Option(
            False, "--from-naive", help="also pair every verified kernel faster than the naive "
                                        "kernel with the naive kernel (what an 'improve the "
                                        "naive kernel' prompt teaches)"),
        append: bool = typer.Option(
            False, "--append", help="keep the pairs already in --out (their runs may be gone) "
                                    "and add the new ones it does not hold"),
        as_json: bool = typer.Option(False, "--json", help="print counts as JSON")) -> None:
    """Turn search runs' verified improvements into slow/fast pairs: each verified child and
    its verified parent, the child faster by the evaluator's bound; held-out tasks excluded;
    timings other programs disturbed give no pair."""
    import json
    from collections import Counter

    from ..train.pairs import (RUN_PAIR_MARGIN, merge_pairs, pairs_from_runs, read_pairs,
                               write_pairs)
    margin = RUN_PAIR_MARGIN if min_speedup is None else min_speedup
    if margin < 1.0:
        raise UserError(f"--min-speedup is at least 1 (a pair's fast kernel is faster), not "
                        f"{margin:g}")
    for d in run_dirs:
        if not d.is_dir():
            raise UserError(f"{d} is not a directory: give search run directories")
    excluded = [t.strip() for t in exclude.split(",") if t.strip()]
    try:
        pairs = pairs_from_runs(run_dirs, excluded, margin, from_naive)
        # a held pair of a task now excluded goes too: a held-out task never gives a pair
        held = [p for p in (read_pairs(out) if append and out.exists() else [])
                if p.task not in excluded]
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if held:
        pairs = merge_pairs(held, pairs)
    n = write_pairs(out, pairs)
    per_task = Counter(p.task for p in pairs)
    if as_json:
        print(json.dumps({"out": str(out), "pairs": n, "added": n - len(held),
                          "per_task": dict(sorted(per_task.items())), "excluded": excluded}))
        return
    counts = ", ".join(f"{t} {k}" for t, k in sorted(per_task.items()))
    added = f" ({n - len(held)} new, {len(held)} kept)" if append else ""
    console.print(f"wrote {n} pairs to {out}{added}" + (f" ({counts})" if n else ""),
                  highlight=False)
