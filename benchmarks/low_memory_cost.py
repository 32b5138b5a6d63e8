"""What `--low-memory` costs in time on GRPO: the multi-turn run of grpo_memory_phases.py (the
CLI test's settings: the 135M model, dot, 3 turns, G 2, 48 tokens, LoRA, checkpointing), once as
it comes and once with the flag, one after the other, each alone on the cores.

    python benchmarks/low_memory_cost.py [--steps 2] [--json benchmarks/results/low_memory_cost.json]

Per variant: the seconds of each update (TRL's compute_loss to the end of the backward: what
the LM-head tiles and the allocator change; generation and judging are left out, they vary
with what the model writes), the whole run's wall seconds, and the trainer's peak RSS (VmHWM). The figure that
matters is the update's seconds with the flag over without it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_by_machine import record  # noqa: E402

PHASES = Path(__file__).resolve().parent / "grpo_memory_phases.py"
# a phase mark; a progress bar may share its line
MARK = re.compile(r"\[\s*([0-9.]+)s\] RSS\s+(\d+) MB\s+HWM\s+(\d+) MB\s+(.*)")


def parse(stderr: str) -> dict:
    """Each update's seconds (TRL's compute_loss, its forward, to the end of the backward) and
    the peak resident memory, from the phase marks."""
    steps, started, hwm = [], None, 0
    for line in stderr.splitlines():
        m = MARK.search(line)
        if not m:
            continue
        at, what = float(m.group(1)), m.group(4)
        hwm = max(hwm, int(m.group(3)))
        if what == "before compute_loss":
            started = at
        elif what == "after backward" and started is not None:
            steps.append(round(at - started, 1))
            started = None
    return {"update_seconds": steps, "peak_rss_mb": hwm}


def run_variant(low_memory: bool, steps: int) -> dict:
    env = {**os.environ, "GC": "1", "STEPS": str(steps), "LOW_MEMORY": "1" if low_memory else "0"}
    with tempfile.TemporaryDirectory(prefix="perfgym-lowmem-") as out:
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(PHASES), out], env=env, capture_output=True,
                              text=True)
        wall = time.monotonic() - started
    name = "low memory" if low_memory else "as it comes"
    if done.returncode != 0:
        return {"variant": name, "error": done.stderr.strip().splitlines()[-1:]}
    return {"variant": name, "wall_seconds": round(wall, 1), **parse(done.stderr)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.steps < 1:
        sys.exit("--steps is at least 1")
    rows = []
    for low in (False, True):
        rows.append(run_variant(low, args.steps))
        print(json.dumps(rows[-1]), flush=True)
    plain, low = rows
    if "error" in plain or "error" in low or not plain["update_seconds"]:
        sys.exit("a variant failed: see the rows above")
    ratio = sum(low["update_seconds"]) / sum(plain["update_seconds"])
    print(f"update: {ratio:.2f}x the time with --low-memory; peak {low['peak_rss_mb']} MB "
          f"against {plain['peak_rss_mb']} MB")
    if args.json:
        record("low_memory_cost", {"steps": args.steps, "rows": rows,
                                   "update_low_over_plain": round(ratio, 3)},
               {"update, --low-memory over without": f"{ratio:.2f}x",
                "peak RSS, without / with": f"{plain['peak_rss_mb']} / {low['peak_rss_mb']} MB"},
               args.json)


if __name__ == "__main__":
    main()
