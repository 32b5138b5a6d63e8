"""Confirmation of the learning report's "faster" answers against the naive kernel, timed
beside them.

An evaluation times an answer against the naive kernel's time from the baseline stage (or the
cache): one draw of it, taken minutes or hours apart. At a size with two 8 MB arrays that draw
moved 2.7x between runs on one machine (stencil3d at 127 x 129 x 61: 0.86, 1.70 and 2.35 ms),
and a near-copy of the naive stencil (`(long)x == 0` for `x == 0`) was counted 1.33x faster
on a held-out task against the slow draw. The search reports its result only after timing it
again against the baseline in interleaved rounds (group_timing.confirm_against_baseline); the
learning report now does the same for every answer it counts faster:

- each distinct kernel counted faster (a task, a split and a kernel text: every arm's copies
  share one confirmation) is timed again with the naive kernel in interleaved rounds
  (group_timing.retime_group: B K1 .. K4, B K1 .. K4, ...), at every size of its split;
- it stays faster when the rounds' speedups, folded over the sizes as the measure folds them
  (the geometric mean), are >= SPEED_BAND and their sign-test lower bounds, folded alike,
  are > 1; a kernel that fails a size in the rounds, or that the rounds flag as the naive
  kernel handed back, is not faster.

The confirmation only takes "faster" away: an answer the evaluation did not count faster is
not timed again (a fast draw of the baseline can hide a faster answer; the figures are then a
floor). Every arm's answers are confirmed alike, so a comparison between arms or runs stays
paired. No copy check is widened for one trick: the timing is the wall.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Callable

GROUP = 4  # kernels timed with one baseline run a round: a round stays short (drift) and the
# baseline's runs are a fifth of the rounds' time, not a half
# Rounds run again when the naive kernel failed one: the naive kernel is the gym's, and its
# failure says nothing of the answers (the steps-8 run's confirmation lost 4 answers so: the
# naive kernel failed its rounds at stencil3d 256^3 and transpose 4096^2, reason not kept)
BASELINE_ATTEMPTS = 3


def key(task: str, split: str, code: str) -> str:
    return hashlib.sha256("\0".join((task, split, code)).encode()).hexdigest()


def row_key(row: dict) -> str:
    return key(row["task"], row["split"], row["code"])


def split_sizes(task, split: str) -> list[dict]:
    """The sizes a split folds over: the held-out sizes for `heldout_sizes`, else the train
    sizes (the training tasks' `train` split and the held-out tasks' `heldout_task`)."""
    return task.sizes("heldout" if split == "heldout_sizes" else "train")


def pending(rows: list[dict], confirmed: dict) -> dict[tuple[str, str], list[str]]:
    """(task, split) -> the distinct kernels counted faster and not confirmed yet, in the
    order the records list them."""
    todo: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        if r.get("faster") and row_key(r) not in confirmed:
            codes = todo.setdefault((r["task"], r["split"]), [])
            if r["code"] not in codes:
                codes.append(r["code"])
    return todo


def fold(per_size: list[dict]) -> dict:
    """One kernel's rounds at every size folded as the measure folds speedups: `confirmed`
    when every size ran right, the geometric mean of the speedups is >= SPEED_BAND and the
    geometric mean of the lower bounds is > 1, and no size found the naive kernel."""
    from perfgym.metrics import geomean
    from perfgym.rewards import SPEED_BAND
    bad = next((p for p in per_size if p["status"] != "OK"), None)
    if bad is not None or not per_size:
        return {"confirmed": False, "status": bad["status"] if bad else "NO_SIZES",
                "speedup": None, "low": None}
    speedup = geomean(p["speedup"] for p in per_size)
    lows = [p["low"] for p in per_size]
    low = 0.0 if any(v <= 0 for v in lows) else geomean(lows)
    copy = any(p.get("naive_copy") for p in per_size)
    return {"confirmed": bool(speedup >= SPEED_BAND and low > 1.0 and not copy), "status": "OK",
            "speedup": round(speedup, 4), "low": round(low, 4), "naive_copy": copy}


def time_group(task, codes: list[str], size: dict, config, retime=None) -> list[dict]:
    """Each kernel of `codes` timed in interleaved rounds with the naive kernel at `size`:
    its speedup (median of the rounds' ratios), the sign test's lower bound, its status (a
    kernel that does not build: its COMPILE_ERROR). When the naive kernel fails the rounds
    they run again, BASELINE_ATTEMPTS in all; a kernel they never timed is NOT_TIMED, with
    the naive kernel's last failure as its `reason`. (`retime`: group_timing.retime_group.)"""
    from perfgym.group_timing import retime_group
    from perfgym.outcome import Outcome, Status
    from perfgym.tasks import format_size
    retime = retime or retime_group
    # retime_group times the members it is told were judged OK; these were, at this split's
    # sizes, in the evaluation
    told_ok = [Outcome(status=Status.OK, task=task.name, sizes=size) for _ in codes]
    for attempt in range(1, BASELINE_ATTEMPTS + 1):
        failure: list = []
        timed = retime(task, codes, told_ok, config, size=size, min_members=1,
                       baseline_failure=failure)
        if not failure:
            break
    rows = []
    for o in timed:
        if o.ok and "group_timed" not in o.flags:
            status = "NOT_TIMED"
        else:
            status = o.status.value
        ok = status == "OK"
        rows.append({"size": format_size(size), "status": status,
                     "speedup": o.speedup if ok else None,
                     "low": o.speedup_low if ok else None,
                     "naive_copy": ok and "baseline_copy" in o.flags,
                     **({"reason": f"the naive kernel failed the rounds {attempt} times, "
                                   f"last: {failure[0].status.value}: {failure[0].message}"[:500]}
                        if failure and status == "NOT_TIMED" else {})})
    return rows


def confirm(rows: list[dict], path: Path, config_for: Callable[[str], object],
            log: Callable[[str], None] = print, group: int = GROUP,
            timer: Callable = time_group) -> dict:
    """Every kernel `rows` count faster and `path` does not hold yet, timed (`timer`) and
    folded, `path` written after each group (a killed stage goes on where it stopped); the
    confirmations, by `key`. `config_for(task)` is the evaluation's config for that task."""
    from perfgym.tasks import get_task
    done = json.loads(path.read_text()) if path.exists() else {}
    todo = pending(rows, done)
    total, count, started = sum(len(c) for c in todo.values()), 0, time.monotonic()
    for (name, split), codes in todo.items():
        task = get_task(name)
        for g in range(0, len(codes), group):
            chunk = codes[g:g + group]
            per_size: list[list[dict]] = [[] for _ in chunk]
            for size in split_sizes(task, split):
                for i, r in enumerate(timer(task, chunk, size, config_for(name))):
                    per_size[i].append(r)
            for code, sizes in zip(chunk, per_size):
                done[key(name, split, code)] = {"task": name, "split": split,
                                                **fold(sizes), "per_size": sizes}
            count += len(chunk)
            tmp = path.with_name(path.name + ".tmp")  # whole or not at all: a kill mid-write
            tmp.write_text(json.dumps(done, indent=1) + "\n")  # must not lose what is done
            os.replace(tmp, path)
            log(f"confirm {name} {split}: {count}/{total} kernels, "
                f"{time.monotonic() - started:.0f} s")
    return done


def apply(rows: list[dict], confirmed: dict | None) -> list[dict]:
    """The records with "faster" kept only where the confirmation agrees. `faster_first`
    keeps the evaluation's own verdict, `confirmed_speedup` and `confirmed_low` the rounds'
    fold. With no confirmations at all (a run reported before they existed) the records are
    returned as they were; a faster record missing from them is not faster (`unconfirmed`)."""
    if confirmed is None:
        return rows
    out = []
    for r in rows:
        if not r.get("faster"):
            out.append(r)
            continue
        c = confirmed.get(row_key(r))
        if c is None:
            out.append({**r, "faster": False, "faster_first": True, "unconfirmed": True})
            continue
        out.append({**r, "faster": c["confirmed"], "faster_first": True,
                    "confirmed_speedup": c["speedup"], "confirmed_low": c["low"],
                    **({"not_timed": True} if c.get("status") == "NOT_TIMED" else {})})
    return out


def summary(rows: list[dict]) -> dict:
    """How many records (not distinct kernels) the confirmation kept and took away, by split;
    `not_timed`: taken away because the naive kernel never ran its rounds at some size (not
    faster, since nothing confirmed it, but not refuted either)."""
    by: dict[str, dict[str, int]] = {}
    for r in rows:
        if r.get("faster_first"):
            cell = by.setdefault(r["split"], {"kept": 0, "refuted": 0, "unconfirmed": 0,
                                              "not_timed": 0})
            cell["unconfirmed" if r.get("unconfirmed") else "kept" if r["faster"] else
                 "not_timed" if r.get("not_timed") else "refuted"] += 1
    return by
