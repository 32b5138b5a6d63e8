"""The search algorithms at the no-flag search's budget, cell by cell, over sessions and machines.

    python benchmarks/search_compare.py --plan          # the cells still to run here, and hours
    python benchmarks/search_compare.py --hours H       # run them, starting none past H hours
    python benchmarks/search_compare.py --merge A.json  # add another file's cells, run nothing
        [--tasks dgemm,dgemv,dot,jacobi2d,transpose] [--seeds 1,2,3]
        [--algos climb,sqd,evolve,best-of-n] [--out runs/search_compare]
        [--json benchmarks/results/search_compare.json]
        [--first-search benchmarks/results/first_search.json]

A cell is one `perfgym search --task T --seed S` of one algorithm, with the model, policy and
sampler of the no-flag search (no flag names them) and its budget: 12 minutes
(`--budget-minutes`, no new step past it), every answer judged at the task's train sizes,
the result judged at the held-out sizes and timed again against naive. `climb` is the no-flag
command itself; the others add `--algo A --budget-minutes 12 --sizes train` and a count of
steps the budget, not the count, ends (FLAGS). A cell's record: task, seed, algorithm, the
machine (CPU model, generation and ISA flags: results_by_machine.machine), commit, wall seconds,
answers, the best speedup (the result's geometric mean over the train sizes; 1.0 when nothing
beat naive), the held-out geometric mean and whether every held-out size was right, the
confirmation, and the best-so-far speedup over the cell's wall time.

The no-flag searches of `first_search.py` (`first_search.json`: `draws`, `tasks`, and the
`--algo sqd` draws of `sqd_same_budget`) are the same cells and are imported as such
(`source: first_search.json`), not run again.

Cells are kept by machine kind (the CPU model, its generation, and the ISA flags that change a
figure: results_by_machine.kind) and never pooled across kinds. Per kind and algorithm: the
geometric mean of the best speedups (mean of logs over a task's seeds, then over the tasks
every algorithm has a cell on) with a 95% bootstrap CI clustered by task (tasks resampled,
then seeds within each); paired ratios on the (task, seed) groups every algorithm has;
`default`, the winner by that geometric mean, declared only when every algorithm has at least
3 seeds on at least 5 tasks, else null and `missing` lists the cells still to run.

Running takes the missing cells round-robin (seed 1 of every algorithm on every task first,
the algorithms taking turns at going first) and writes the JSON after every cell. A cell
killed part way (kill -9) is run again from the start (its run directory moved to
`ALGO.killed`: a resumed search would get more than its minutes); one that finished but was
not written yet is read from its run directory. `--hours H` starts a cell only when it is
expected to end within H hours of the session's start (the mean wall time of this kind's
cells of that algorithm), so a session gives what it has. Two sessions on one `--out` are
refused. --tasks, --seeds and --algos choose the cells to run; the file's summaries always
compare the default ones (and any the command adds). Errors are one line, exit status 2.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import itertools
import json
import math
import os
import random
import re
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_by_machine import KIND_FLAGS, RESULTS, commit, kind, machine

ALGOS = ("climb", "sqd", "evolve", "best-of-n")
OPTIONAL = ("refine",)
# dgemm and four others of different shapes: a matrix-vector product, a reduction, a stencil
# and a copy (each has a no-flag draw in first_search.json already)
TASKS = "dgemm,dgemv,dot,jacobi2d,transpose"
SEEDS = "1,2,3"
MIN_SEEDS, MIN_TASKS = 3, 5  # what `default` needs of every algorithm, on one machine kind
CELL_MINUTES = 15.0  # a cell's estimate on a kind with none measured yet
BOOTSTRAP = 10_000
FIRST_SEARCH = RESULTS / "first_search.json"


def budget_minutes() -> float:
    from perfgym.cli.search_plan import NO_FLAG_BUDGET_MINUTES
    return NO_FLAG_BUDGET_MINUTES


def flags(algo: str) -> dict:
    """The algorithm's `perfgym search` flags past --task and --seed, as SearchFlags fields.
    The climb's are none: it is the no-flag search. The others get its budget and sizes, and
    a count of steps past what the budget holds (about 50 answers here), so the budget ends
    them; best-of-n then samples in rounds of 8 (search/best_of_n.py)."""
    if algo == "climb":
        return {}
    common = {"algo": algo, "budget_minutes": budget_minutes(), "sizes": "train"}
    return {**common, **{"sqd": {}, "evolve": {"generations": 60}, "best-of-n": {"n": 512},
                         "refine": {"chains": 4, "turns": 40}}[algo]}


def cli_args(fields: dict) -> list[str]:
    return [arg for k, v in fields.items() for arg in (f"--{k.replace('_', '-')}", str(v))]


def key(task: str, seed: int, algo: str) -> str:
    return f"{task}/seed{seed}/{algo}"


def machine_kind(cpu: str, isa: list[str], family: str | None = None) -> str:
    """'AMD EPYC (family 25 model 17) | avx2': the CPU model, its generation and its ISA
    flags that change a figure (cells that recorded no generation are a kind of their own)."""
    return kind(cpu, [f for f in isa if f in KIND_FLAGS], family)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Refused(Exception):
    """A one-line error in what the command was given: exit status 2."""


# -- the plan -------------------------------------------------------------------------------

def plan(tasks: list[str], seeds: list[int], algos=ALGOS) -> list[tuple[int, str, str]]:
    """(seed, task, algo) cells, round-robin: every algorithm on every task at a seed before
    the next seed, so a session cut short leaves every algorithm the same (task, seed) groups
    but the last. The algorithms' order rotates from group to group."""
    algos = tuple(algos)
    cells = []
    for group, (seed, task) in enumerate(itertools.product(seeds, tasks)):
        turn = group % len(algos)
        cells += [(seed, task, algo) for algo in algos[turn:] + algos[:turn]]
    return cells


def missing(cells: dict, tasks, seeds, algos=ALGOS) -> list[tuple[int, str, str]]:
    """The planned cells a kind's `cells` do not hold, in plan order."""
    return [c for c in plan(tasks, seeds, algos) if key(c[1], c[0], c[2]) not in cells]


def cell_seconds(cells: dict, algo: str | None = None) -> float:
    """What a cell of `algo` takes on this kind: the mean wall time of that algorithm's cells,
    else CELL_MINUTES. (Per algorithm: on the AVX2 EPYC a dgemm climb ended in 38-86 s, its
    rewrites done and no round of the coder's fitting, where the others run their budget; one
    mean over both once planned 57 cells in 0.9 h.)"""
    walls = [c["wall_seconds"] for c in cells.values()
             if c.get("wall_seconds") and algo in (None, c.get("algo"))]
    return statistics.fmean(walls) if walls else CELL_MINUTES * 60


def todo_seconds(cells: dict, todo: list) -> float:
    """The seconds of the cells `todo` on this kind, each by its algorithm's estimate."""
    return sum(cell_seconds(cells, algo) for _, _, algo in todo)


def runnable(todo: list, hours: float | None, run_one, estimate, clock=time.monotonic) -> int:
    """Run `todo`'s cells in order while the next is expected to end within `hours` of the
    start (`estimate(algo)`: a cell of that algorithm's seconds now); returns how many ran."""
    started = clock()
    for n, cell in enumerate(todo):
        if hours is not None and clock() - started + estimate(cell[2]) > hours * 3600:
            log(f"{len(todo) - n} cells left: the next would end past {hours} h")
            return n
        run_one(*cell)
    return len(todo)


def plan_text(doc: dict, here: str, tasks, seeds, algos) -> str:
    """What `--plan` prints: this kind's cells still to run, in order, and their hours."""
    cells = doc["cells"].get(here, {})
    todo = missing(cells, tasks, seeds, algos)
    imported = sum(c.get("source") == "first_search.json" for c in cells.values())
    planned = len(plan(tasks, seeds, algos))
    held = (f"{planned} cells planned ({len(algos)} algorithms x {len(tasks)} tasks x "
            f"{len(seeds)} seeds); this kind holds {len(cells)} cells ({imported} from "
            f"first_search.json), {planned - len(todo)} of them planned; {len(todo)} to run")
    basis = ("each by its algorithm's mean wall time here, else" if cells
             else "none measured on it: each")
    hours = (f"estimated: {len(todo)} cells, {todo_seconds(cells, todo) / 3600:.1f} h "
             f"({basis} {CELL_MINUTES:.0f} min)")
    lines = [f"machine kind: {here} (this machine); model {doc['model']}", held, hours]
    if len(tasks) < MIN_TASKS or len(seeds) < MIN_SEEDS:
        lines.append(f"note: `default` needs {MIN_SEEDS} seeds on {MIN_TASKS} tasks of every "
                     "algorithm; this plan cannot declare one")
    lines += [f"{i:4d}  {task:10s} seed {seed}  {algo:10s} "
              f"(ends at {todo_seconds(cells, todo[:i]) / 3600:.1f} h)"
              for i, (seed, task, algo) in enumerate(todo, 1)]
    return "\n".join(lines)


# -- first_search.json's no-flag draws are climb cells (and its --algo sqd draws SQD cells) --

def extra_flags(command: str) -> list[str]:
    """A `perfgym search` command's flags besides --task, --seed, --run-dir and --json."""
    words = shlex.split(command)[2:]
    out, i = [], 0
    while i < len(words):
        if words[i] in ("--task", "--seed", "--run-dir"):
            i += 2
            continue
        if words[i] != "--json":
            out.append(words[i])
        i += 1
    return out


def first_search_cells(doc: dict) -> list[dict]:
    """The cells of first_search.json: its draws whose command is the no-flag search (climb)
    or the no-flag search with `--algo sqd` (sqd); any other is not one of these cells."""
    from perfgym.models import CODER
    rows = [*doc.get("draws", []), *doc.get("tasks", []),
            *(doc.get("sqd_same_budget") or {}).get("draws", [])]
    cells = []
    for row in rows:
        algo = {(): "climb", ("--algo", "sqd"): "sqd"}.get(tuple(extra_flags(row["command"])))
        if algo is None or not row.get("machine") or row.get("train_geomean_speedup") is None:
            continue
        m = row["machine"]
        cell = {"task": row["task"], "seed": row["seed"], "algo": algo,
                "machine": {"cpu": m["cpu"], "family": m.get("family"), "isa": m["isa"],
                            "cores": m.get("cores")},
                "kind": machine_kind(m["cpu"], m["isa"], m.get("family")),
                "commit": row.get("commit"),
                "date": row.get("date"), "command": row["command"],
                "model": CODER.title,  # the no-flag default of first_search.py's runs
                "wall_seconds": row["wall_seconds"], "answers": row.get("answers"),
                "train_geomean_speedup": row["train_geomean_speedup"],
                "best_speedup": max(1.0, row["train_geomean_speedup"]),
                "heldout_geomean_speedup": row.get("heldout_geomean_speedup"),
                "heldout_all_ok": row.get("heldout_all_ok"), "confirmed": row.get("confirmed"),
                "curve": None, "source": "first_search.json"}
        if row.get("disturbed"):
            cell["disturbed"] = row["disturbed"]
        cells.append(cell)
    return cells


def add_cells(doc: dict, cells: list[dict]) -> int:
    """Add the cells `doc` does not hold yet (a cell it holds stays as it is); how many."""
    added = 0
    for cell in cells:
        held = doc["cells"].setdefault(cell["kind"], {})
        k = key(cell["task"], cell["seed"], cell["algo"])
        if k not in held:
            held[k] = cell
            added += 1
            doc.get("failed", {}).get(cell["kind"], {}).pop(k, None)
    return added


# -- statistics: the bootstrap clustered by task ----------------------------------------------

def task_mean(by_task: dict[str, list[float]]) -> float:
    """The mean over tasks of the mean over a task's runs: every task weighs the same."""
    return statistics.fmean(statistics.fmean(v) for v in by_task.values())


def bootstrap_ci(by_task: dict[str, list[float]], n: int = BOOTSTRAP, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of task_mean, clustered by task: each resample draws the tasks with
    replacement, then each drawn task's runs with replacement (a task is a cluster of
    seeds; which tasks were chosen is a draw too)."""
    rng = random.Random(seed)
    tasks = sorted(by_task)
    stats = sorted(
        statistics.fmean(statistics.fmean(rng.choices(by_task[t], k=len(by_task[t])))
                         for t in rng.choices(tasks, k=len(tasks)))
        for _ in range(n))
    tail = (1 - level) / 2
    return stats[int(tail * (n - 1))], stats[math.ceil((1 - tail) * (n - 1))]


def summarize(by_task: dict[str, list[float]], n: int = BOOTSTRAP) -> dict:
    """Mean of logs -> geometric mean and its CI."""
    lo, hi = bootstrap_ci(by_task, n)
    return {"geomean": math.exp(task_mean(by_task)), "ci95": [math.exp(lo), math.exp(hi)],
            "runs": sum(len(v) for v in by_task.values()), "tasks": len(by_task)}


def paired_ratios(groups: list[tuple[str, dict[str, float]]], algos, n: int = BOOTSTRAP) -> dict:
    """'a / b' -> the geometric mean ratio of a's best speedup over b's and its CI (clustered
    by task), over the groups (task, {algo: log best speedup}) that hold both."""
    comparisons = {}
    for a, b in itertools.combinations(algos, 2):
        diff: dict[str, list[float]] = {}
        for task, got in groups:
            if a in got and b in got:
                diff.setdefault(task, []).append(got[a] - got[b])
        if diff:
            sm = summarize(diff, n)
            comparisons[f"{a} / {b}"] = {"ratio": sm["geomean"], "ci95": sm["ci95"],
                                         "pairs": sm["runs"], "tasks": sm["tasks"]}
    return comparisons


def kind_summary(cells: dict, tasks, seeds, algos=ALGOS, n: int = BOOTSTRAP) -> dict:
    """One machine kind's comparison, from its cells (key -> record)."""
    seeds_of = {a: {} for a in algos}
    for c in cells.values():
        if c["algo"] in seeds_of:
            seeds_of[c["algo"]].setdefault(c["task"], {})[c["seed"]] = math.log(c["best_speedup"])
    compared = sorted(set.intersection(*(set(s) for s in seeds_of.values())))
    full = [t for t in compared if all(len(seeds_of[a][t]) >= MIN_SEEDS for a in algos)]
    ci = {a: summarize({t: list(seeds_of[a][t].values()) for t in compared}, n)
          for a in algos} if compared else {}
    groups = [(t, s) for t in compared for s in sorted(seeds_of[algos[0]][t])
              if all(s in seeds_of[a][t] for a in algos)]
    comparisons = paired_ratios([(t, {a: seeds_of[a][t][s] for a in algos}) for t, s in groups],
                                algos, n)
    default = None
    if len(full) >= MIN_TASKS:
        default = max(algos, key=lambda a: ci[a]["geomean"])
    todo = missing(cells, tasks, seeds, algos)
    return {"draws": {a: {t: len(v) for t, v in sorted(seeds_of[a].items())} for a in algos},
            "tasks": compared, "tasks_with_3_seeds": full, "ci": ci,
            "groups": [list(g) for g in groups], "comparisons": comparisons,
            "default": default,
            "missing": [] if default else [key(t, s, a) for s, t, a in todo],
            "hours_to_run": round(todo_seconds(cells, todo) / 3600, 1)}


def headline(s: dict, algos) -> dict:
    """A kind's figures as strings, for the docs' table (docs/hooks/results_tables.py)."""
    out = {f"{a}: best speedup": f"{c['geomean']:.2f}x [{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}]"
           f" ({c['runs']} cells, {c['tasks']} tasks)" for a, c in s["ci"].items()}
    for a in algos:
        out.setdefault(f"{a}: best speedup", f"{sum(s['draws'][a].values())} cells; no task "
                       "every algorithm has")
    out["default"] = s["default"] or (f"none yet: {len(s['missing'])} cells to run "
                                      f"(~{s['hours_to_run']} h)")
    return out


def summaries(doc: dict, tasks, seeds, algos, n: int = BOOTSTRAP) -> dict:
    """`machines`: per kind, its comparison and what the docs' table shows."""
    out = {}
    for k, cells in sorted(doc["cells"].items()):
        s = kind_summary(cells, tasks, seeds, algos, n)
        by_date = sorted(cells.values(), key=lambda c: c.get("date") or "")
        dates = sorted({c["date"] for c in by_date if c.get("date")})
        commits = list(dict.fromkeys(c["commit"] for c in by_date if c.get("commit")))
        m = by_date[-1]["machine"]
        out[k] = {"cpu": m["cpu"], "family": m.get("family"), "isa": m["isa"],
                  "cores": m.get("cores"),
                  "date": " to ".join(dict.fromkeys([dates[0], dates[-1]])) if dates else None,
                  "commit": (f"{commits[-1]} and {len(commits) - 1} earlier" if len(commits) > 1
                             else commits[0] if commits else None),
                  "commits": commits, "model": doc["model"], "cells": len(cells),
                  "summary": headline(s, algos), **s}
    return out


def across_kinds(doc: dict, machines: dict, algos=ALGOS, n: int = BOOTSTRAP) -> dict:
    """Every kind's cells together, for the one default every machine gets. The machine
    changes between sessions, so no kind may ever hold 3 seeds of every cell; the question
    the default answers is which algorithm to run on whatever machine a user has.

    A draw is one kind's (task, seed) cell, a task's draws are its cells on every kind, and
    the bootstrap is clustered by task (the tasks drawn, then each drawn task's draws). A
    ratio pairs two algorithms' cells of one (kind, task, seed), never cells of two kinds.
    `default` is the highest geometric mean once every algorithm has 3 draws on each of 5
    tasks; `leader_by_kind` names each kind's own leader (its `machines` entry), so a
    default that leads pooled but trails on some kind shows it."""
    logs = {a: {} for a in algos}
    by_group: dict[tuple, dict[str, float]] = {}
    for kind_name, cells in sorted(doc["cells"].items()):
        for c in cells.values():
            if c["algo"] in logs:
                value = math.log(c["best_speedup"])
                logs[c["algo"]].setdefault(c["task"], []).append(value)
                by_group.setdefault((kind_name, c["task"], c["seed"]), {})[c["algo"]] = value
    compared = sorted(set.intersection(*(set(v) for v in logs.values())))
    full = [t for t in compared if all(len(logs[a][t]) >= MIN_SEEDS for a in algos)]
    ci = {a: summarize({t: logs[a][t] for t in compared}, n) for a in algos} if compared else {}
    comparisons = paired_ratios([(task, got) for (_, task, _), got in sorted(by_group.items())
                                 if task in compared], algos, n)
    short = [f"{a} on {t}: {len(logs[a].get(t, []))} of {MIN_SEEDS} draws"
             for t in TASKS.split(",") for a in algos if len(logs[a].get(t, [])) < MIN_SEEDS]
    default = (max(algos, key=lambda a: ci[a]["geomean"]) if len(full) >= MIN_TASKS
               else None)
    leaders = {k: max(m["ci"], key=lambda a: m["ci"][a]["geomean"])
               for k, m in machines.items() if m.get("ci")}
    return {"kinds": sorted(doc["cells"]),
            "draws": {a: {t: len(v) for t, v in sorted(logs[a].items())} for a in algos},
            "tasks": compared, "tasks_with_3_draws": full, "ci": ci,
            "comparisons": comparisons, "leader_by_kind": leaders, "default": default,
            "short": [] if default else short}


# -- the results file ---------------------------------------------------------------------------

def new_doc(model: str) -> dict:
    return {"benchmark": "search_compare", "script": "benchmarks/search_compare.py",
            "model": model, "cells": {}, "failed": {}, "machines": {}}


def load(path: Path, model: str) -> dict:
    """The results file (a new one if there is none). Another model's file is refused."""
    if not path.exists():
        return new_doc(model)
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise Refused(f"{path} is not JSON ({exc}): restore it from git") from None
    if "cells" not in doc:
        raise Refused(f"{path} is not an equal-time comparison (no `cells`): give another "
                      "--json")
    if doc["model"] != model:
        raise Refused(f"{path} compares {doc['model']}'s searches, and the no-flag search's "
                      f"model here is {model}: give another --json")
    doc.setdefault("failed", {})
    return doc


def write(path: Path, doc: dict, args) -> None:
    """Merge `doc`'s cells into the file as it is now (another session's cells stay), then
    write it whole with its summaries, atomically: a kill leaves the old file or the new."""
    if path.is_file():
        add_cells(doc, [c for cells in load(path, doc["model"])["cells"].values()
                        for c in cells.values()])
    tasks, seeds, algos = compared(args)
    machines = summaries(doc, tasks, seeds, algos)
    kept = {k: doc[k] for k in ("benchmark", "script", "model", "cells", "failed")}
    doc.clear()  # (in this order: what was compared, the summaries, then the cells)
    pooled = across_kinds(kept, machines, algos)
    doc.update({k: kept[k] for k in ("benchmark", "script", "model")},
               **settings(tasks, seeds, algos),
               default=pooled["default"], across_kinds=pooled, machines=machines,
               cells=kept["cells"], failed=kept["failed"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


def compared(args) -> tuple[list[str], list[int], tuple[str, ...]]:
    """What the file's summaries compare: the default tasks, seeds and algorithms, and any the
    command adds. --tasks, --seeds and --algos choose which cells run now; a session that runs
    only best-of-n must not rewrite the comparison (and its `default`) as best-of-n alone."""
    return (list(dict.fromkeys(TASKS.split(",") + list(args.tasks))),
            sorted({int(s) for s in SEEDS.split(",")} | set(args.seeds)),
            tuple(dict.fromkeys(ALGOS + tuple(args.algos))))


def settings(tasks, seeds, algos) -> dict:
    return {"budget_minutes": budget_minutes(), "algorithms": list(algos),
            "tasks": list(tasks), "seeds": list(seeds),
            "flags": {a: ["perfgym", "search", "--task", "T", "--seed", "S",
                          *cli_args(flags(a))] for a in algos},
            "statistic": "per cell the best speedup over naive (the result's geometric mean "
                         "over the train sizes; 1.0 when nothing beat naive); per machine kind "
                         "and algorithm the geometric mean (mean of logs over a task's seeds, "
                         "then over the tasks every algorithm has a cell on) with a 95% "
                         f"percentile bootstrap CI clustered by task ({BOOTSTRAP} resamples: "
                         "tasks with replacement, then seeds within each); comparisons: the "
                         "paired ratio A / B on the (task, seed) groups every algorithm has, "
                         "same bootstrap; default: the highest geometric mean, once every "
                         f"algorithm has {MIN_SEEDS} seeds on {MIN_TASKS} tasks"}


# -- one cell --------------------------------------------------------------------------------

def curve(points: list[tuple[float, float | None]], wall: float | None = None) -> list:
    """The best-so-far speedup over the cell's wall time: [seconds, speedup] at the start
    (1.0: naive) and at each gain, then at the end. `points`: (seconds, speedup or None)."""
    best, out = 1.0, [[0.0, 1.0]]
    for t, s in sorted(points, key=lambda p: p[0]):
        if s is not None and s > best:
            best = s
            out.append([round(t, 1), round(s, 4)])
    if wall is not None:
        out.append([round(wall, 1), round(best, 4)])
    return out


def store_points(run_dir: Path, started: float) -> tuple[list, dict]:
    """(seconds since the start, speedup of a right kernel, else None) per evaluated
    candidate, and the status mix."""
    con = sqlite3.connect(run_dir / "run.sqlite")
    try:
        rows = con.execute("SELECT status, outcome, evaluated FROM candidates "
                           "WHERE evaluated IS NOT NULL").fetchall()
    finally:
        con.close()
    points, statuses = [], {}
    for status, outcome, evaluated in rows:
        o = json.loads(outcome or "{}")
        statuses[status] = statuses.get(status, 0) + 1
        ok = status == "OK" and not o.get("copied_from")
        points.append((evaluated - started, o.get("speedup") if ok else None))
    return points, statuses


def measure(run_dir: Path, cell: dict) -> dict:
    """A finished cell's record, from its run directory: `result.json` (the search's --json),
    the run store and the `started` and `done` stamps."""
    from perfgym.store import RunStore
    result = json.loads((run_dir / "result.json").read_text())
    started = float((run_dir / "started").read_text())
    wall = float((run_dir / "done").read_text())
    store = RunStore(run_dir)
    try:
        config = store.config() or {}
        heldout = [row for _, _, d in store.events("heldout") for row in d["rows"]
                   if row["candidate"] == result["best_id"]]
    finally:
        store.close()
    points, statuses = store_points(run_dir, started)
    best = result.get("best") or {}
    train = best.get("speedup")
    confirmed = result.get("confirmed") or {}
    h = heldout[-1] if heldout else {}
    return {**cell, "model": (config.get("model_id") or {}).get("name") or config.get("model"),
            "sampling": config.get("sampling"), "wall_seconds": round(wall, 1),
            "answers": result["answers"]["answers"], "answer_counts": result["answers"],
            "statuses": statuses, "best_id": result["best_id"],
            "train_geomean_speedup": train, "best_speedup": max(1.0, train or 1.0),
            "heldout_geomean_speedup": h.get("speedup"),
            "heldout_all_ok": h.get("status") == "OK" if h else None,
            "confirmed": ({"speedup": confirmed["speedup"], "low": confirmed.get("speedup_low")}
                          if "speedup" in confirmed else confirmed or None),
            "curve": curve(points, wall), "source": "search_compare.py"}


def ready(run_dir: Path) -> bool:
    """True when the cell's search finished (measure it); else the directory is made ready
    for a new start: a run killed part way is moved to ALGO.killed, not resumed (it would get
    more than its minutes)."""
    if (run_dir / "done").is_file() and (run_dir / "result.json").is_file():
        return True
    if run_dir.exists():
        killed = run_dir.with_name(run_dir.name + ".killed")
        shutil.rmtree(killed, ignore_errors=True)
        run_dir.rename(killed)
    run_dir.mkdir(parents=True)
    return False


def search(run_dir: Path, task: str, seed: int, algo: str) -> str | None:
    """Run the cell's search into `run_dir`; why it failed, or None."""
    command = [sys.executable, "-m", "perfgym.cli", "search", "--task", task, "--seed",
               str(seed), "--run-dir", str(run_dir), "--json", *cli_args(flags(algo))]
    (run_dir / "started").write_text(f"{time.time()}\n")
    begun = time.monotonic()
    with open(run_dir / "result.part", "w") as out, open(run_dir / "search.log", "a") as err:
        done = subprocess.run(command, stdout=out, stderr=err, check=False)
    wall = time.monotonic() - begun
    if done.returncode != 0:
        tail = (run_dir / "search.log").read_text()[-1500:].strip().splitlines()
        return f"perfgym search exited {done.returncode}: " + " | ".join(tail[-6:])
    os.replace(run_dir / "result.part", run_dir / "result.json")
    (run_dir / "done").write_text(f"{wall:.1f}\n")
    return None


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def run_cell(seed: int, task: str, algo: str, doc: dict, args, here: dict) -> None:
    """One cell: run (or read, when it finished unwritten), record, write the file."""
    run_dir = args.out / slug(here["kind"]) / task / f"seed{seed}" / algo
    log(f"{task} seed {seed} {algo}: {run_dir}")
    cell = {"task": task, "seed": seed, "algo": algo, "machine": here["machine"],
            "kind": here["kind"], "commit": here["commit"],
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "command": shlex.join(["perfgym", "search", "--task", task, "--seed", str(seed),
                                   *cli_args(flags(algo))]), "run_dir": str(run_dir)}
    error = None if ready(run_dir) else search(run_dir, task, seed, algo)
    if error is None:
        try:
            record = measure(run_dir, cell)
        except Exception as exc:  # a broken store is this cell's failure, not the session's
            error = f"measuring: {type(exc).__name__}: {exc}"
    if error is not None:
        log(f"  FAILED: {error}")
        doc["failed"].setdefault(here["kind"], {})[key(task, seed, algo)] = {**cell,
                                                                            "error": error}
    else:
        log(f"  {record['answers']} answers, best {record['best_speedup']:.2f}x naive over the "
            f"train sizes, {record['wall_seconds']:.0f} s")
        add_cells(doc, [record])
    write(args.json, doc, args)


# -- the command --------------------------------------------------------------------------------

def parse(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=TASKS)
    ap.add_argument("--seeds", default=SEEDS)
    ap.add_argument("--algos", default=",".join(ALGOS),
                    help=f"of {', '.join(ALGOS + OPTIONAL)}")
    ap.add_argument("--plan", action="store_true", help="print the cells still to run on "
                    "this machine kind and their hours; run nothing")
    ap.add_argument("--hours", type=float, help="start a cell only when it should end within "
                    "this many hours (0: import and summarize only)")
    ap.add_argument("--merge", type=Path, nargs="+", help="add these results files' cells; "
                    "run nothing")
    ap.add_argument("--out", type=Path, default=Path("runs/search_compare"))
    ap.add_argument("--json", type=Path, default=RESULTS / "search_compare.json")
    ap.add_argument("--first-search", type=Path, default=FIRST_SEARCH)
    args = ap.parse_args(argv)
    try:
        args.tasks = [t for t in args.tasks.split(",") if t]
        args.seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        raise Refused(f"--seeds takes integers, comma-separated, not {args.seeds!r}") from None
    args.algos = tuple(a for a in args.algos.split(",") if a)
    from perfgym.tasks import builtin_names
    if unknown := [t for t in args.tasks if t not in builtin_names()]:
        raise Refused(f"--tasks: {', '.join(unknown)} is not a built-in task (perfgym tasks)")
    if not args.algos or any(a not in ALGOS + OPTIONAL for a in args.algos):
        raise Refused(f"--algos takes some of {', '.join(ALGOS + OPTIONAL)}, comma-separated")
    if not args.tasks or not args.seeds or len(set(args.algos)) != len(args.algos):
        raise Refused("--tasks and --seeds need one each, and --algos names each once")
    if args.hours is not None and args.hours < 0:
        raise Refused(f"--hours is 0 or more, not {args.hours}")
    if args.plan and args.merge:
        raise Refused("--plan and --merge each run alone: give one")
    return args


def prepare() -> dict:
    """Before the first cell, as first_search.py: the model fetched and the engine's settings
    for this machine chosen (first-use costs, not a cell's); this machine's record."""
    from perfgym.models import search_default_model
    from perfgym.policies import default_local_policy
    subprocess.run([sys.executable, "-m", "perfgym.cli", "model", "fetch",
                    search_default_model()], check=True, capture_output=True)
    if default_local_policy() == "openvino":
        probe = ("from perfgym.policies.openvino import _measured_settings; from perfgym."
                 "models import named_gguf, search_default_model; "
                 "_measured_settings(named_gguf(search_default_model()))")
        subprocess.run([sys.executable, "-c", probe], check=True)
    here = machine(every_flag=True)
    return {"machine": here, "kind": machine_kind(here["cpu"], here["isa"], here["family"]),
            "commit": commit()}


@contextlib.contextmanager
def session_lock(out: Path):
    """One session at a time on an --out: two would share the cores and the run dirs."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".session.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Refused(f"another search_compare session is running on {out}") from None
        yield


def main(argv: list[str] | None = None) -> None:
    from perfgym.models import model_title, search_default_model
    args = parse(argv)
    doc = load(args.json, model_title(search_default_model()))
    if args.first_search.is_file():
        add_cells(doc, first_search_cells(json.loads(args.first_search.read_text())))
    here = machine()
    here_kind = machine_kind(here["cpu"], here["isa"], here["family"])
    if args.plan:
        print(plan_text(doc, here_kind, args.tasks, args.seeds, args.algos))
        return
    if args.merge:
        for other in args.merge:
            if not other.exists():
                raise Refused(f"--merge: there is no {other}")
            added = add_cells(doc, [c for cells in load(other, doc["model"])["cells"].values()
                                    for c in cells.values()])
            log(f"{other}: {added} cells added")
        write(args.json, doc, args)
        return
    with session_lock(args.out):
        write(args.json, doc, args)  # the imported cells, before any runs
        here: dict = {}

        def run_one(seed: int, task: str, algo: str) -> None:
            here.update(here or prepare())
            run_cell(seed, task, algo, doc, args, here)
        runnable(missing(doc["cells"].get(here_kind, {}), args.tasks, args.seeds, args.algos),
                 args.hours, run_one,
                 lambda algo: cell_seconds(doc["cells"].get(here_kind, {}), algo))
    report(doc)


def report(doc: dict) -> None:
    def figures(m: dict) -> None:
        for a, c in m["ci"].items():
            print(f"  {a:10s} {c['geomean']:.2f}x [{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}] "
                  f"({c['runs']} cells, {c['tasks']} tasks)")
        for pair, c in m["comparisons"].items():
            print(f"  {pair:22s} {c['ratio']:.2f} [{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}] "
                  f"({c['pairs']} pairs)")
    for k, m in doc["machines"].items():
        print(f"{k}: {m['cells']} cells; default: {m['summary']['default']}")
        figures(m)
    pooled = doc.get("across_kinds")
    if pooled:
        print(f"all {len(pooled['kinds'])} kinds: default: {pooled['default'] or 'none yet: '}"
              f"{'' if pooled['default'] else '; '.join(pooled['short'])}")
        figures(pooled)


if __name__ == "__main__":
    try:
        main()
    except Refused as exc:
        print(f"search_compare: {exc}", file=sys.stderr)
        sys.exit(2)
