"""Hardware counters through `perf stat`, where the machine has them. Most VMs do not expose
the PMU (perf answers "<not supported>"); the provider then says so and the chain falls back.

Counting runs the harness once more (its check call, one kernel call) in the sandbox, under
perf."""
from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache

NAME = "perf"
EVENTS = ("cycles", "instructions", "cache-references", "cache-misses", "branch-misses")


@lru_cache(maxsize=1)
def counters_problem() -> str | None:
    """Why hardware counters cannot be read here, or None (asked once per process)."""
    if shutil.which("perf") is None:
        return "perf is not installed"
    try:
        r = subprocess.run(["perf", "stat", "-x", ",", "-e", "cycles,instructions", "true"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"perf did not run ({exc})"
    rows = [ln.split(",") for ln in r.stderr.splitlines() if ln.count(",") >= 2]
    if r.returncode != 0 or not rows:
        return "perf stat failed: " + (r.stderr.strip().splitlines() or ["no output"])[-1][:100]
    if any(row[0].startswith("<not") for row in rows):
        return "perf stat: hardware counters not supported here, as in most VMs"
    return None


def unavailable(ctx) -> str | None:
    if ctx.workdir is None or not (ctx.workdir / "run").is_file():
        return "no built harness (not a C/C++ kernel)"
    return counters_problem()


def run(ctx) -> list[str]:
    from ..backends.c import build as cbuild
    from .. import sandbox
    argv = ["perf", "stat", "-x", ",", "-o", "perf.txt", "-e", ",".join(EVENTS),
            "./run", "manifest.txt", "check"]
    result = sandbox.run(argv, ctx.workdir, cbuild.run_limits(ctx.task, ctx.size, ctx.config),
                         env=cbuild.run_env(ctx.config))
    if not result.ok:
        raise RuntimeError(f"perf stat run failed (status {result.returncode})")
    return summarize((ctx.workdir / "perf.txt").read_text(errors="replace"))


def summarize(text: str) -> list[str]:
    counts: dict[str, float] = {}
    for line in text.splitlines():
        row = line.split(",")
        if len(row) >= 3 and row[0].replace(".", "", 1).isdigit():
            counts[row[2].split(":")[0]] = float(row[0])
    lines = []
    if counts.get("cycles") and "instructions" in counts:
        lines.append(f"{counts['instructions'] / counts['cycles']:.2f} instructions per cycle "
                     f"({counts['cycles']:.3g} cycles, one call with the harness around it)")
    if counts.get("cache-references") and "cache-misses" in counts:
        lines.append(f"cache misses {counts['cache-misses'] / counts['cache-references'] * 100:.1f}%"
                     " of cache references")
    if "branch-misses" in counts:
        lines.append(f"{counts['branch-misses']:.3g} branch misses")
    return lines or ["perf stat counted nothing"]
