"""What a check costs an evaluation: one kernel evaluated at every train size with the check on
and off, the two ways alternating which goes first (reuse_probe_cost.py, late_check_cost.py)."""
from __future__ import annotations

import statistics
import time


def two_ways(task, kernel: str, code: str, repeats: int, switch, on: str, config,
             each=None) -> dict:
    """`switch(True)` turns the check on, `switch(False)` off (left on at the end); `on` names
    the way with it in the row. `each(outcome)` sees every evaluation made with it on. Returns
    the row's figures: wall seconds each way, the wall ratio on / off, and the geomean ratio of
    the median calls (the check's effect on the figure). A failed evaluation ends the run."""
    from perfgym import evaluate
    wall: dict[str, list[float]] = {on: [], "none": []}
    median: dict[str, list[float]] = {on: [], "none": []}
    try:
        for r in range(repeats):
            for way in ((on, "none") if r % 2 == 0 else ("none", on)):
                switch(way == on)
                for size in task.sizes("train"):
                    t0 = time.monotonic()
                    o = evaluate(task, code, size, config)
                    wall[way].append(time.monotonic() - t0)
                    if not o.ok:
                        raise SystemExit(f"{task.name} {kernel} {size} ({way}): "
                                         f"{o.status.value}: {o.message}")
                    median[way].append(o.timing.median)
                    if way == on and each is not None:
                        each(o)
    finally:
        switch(True)
    return {"wall_s": {k: round(sum(v), 2) for k, v in wall.items()},
            "wall_ratio": sum(wall[on]) / sum(wall["none"]),
            "median_ratio": statistics.geometric_mean(
                [f / o for f, o in zip(median[on], median["none"])])}
