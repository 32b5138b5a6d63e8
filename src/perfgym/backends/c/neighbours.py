"""Noisy neighbours: did another program take the CPU while a kernel was timed?

Around each timed run the driver reads the kernel's (kernel here meaning Linux's) accounting in
/proc/stat for the CPUs this process may use (busy and steal time, the runnable processes) and
its own thread's CPU time and its children's (the harness). What the CPUs were busy with beyond that was
someone else's work. A run is disturbed only on strong evidence, both of:

  - the run was short of CPU: it got less than half of what its threads could have used over
    its wall time (one core for a serial kernel, one per OpenMP thread), so its timing is off
    by 2x or more;
  - others took at least FOREIGN_SHARE of what it missed (and MIN_FOREIGN_SECONDS at least), so
    the shortfall went to them and not to the harness's own serial work.

A busy compiler on the other core of a serial kernel's machine is not a disturbance (the kernel
kept its core), nor is one more busy process than there are cores; two busy processes per core
are. Smaller shares of foreign load stay in the figures (parent_check["load"]) unflagged.
"""
from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

SHORT_SHARE = 0.5  # the run missed more than half of the CPU its threads could have had...
FOREIGN_SHARE = 0.5  # ...and others took at least half of what it missed...
MIN_FOREIGN_SECONDS = 0.1  # ...and at least this much (10 clock ticks a CPU: above rounding)

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Snapshot:
    wall: float  # time.monotonic()
    busy: float  # CPU seconds the allowed CPUs spent on any work (user, nice, system, irq)
    steal: float  # CPU seconds a hypervisor gave to other machines
    running: int  # runnable processes on the machine (procs_running), this one included
    ours: float  # CPU seconds of this thread and of finished children (the harness)


def snapshot() -> Snapshot:
    cpus = {f"cpu{i}" for i in os.sched_getaffinity(0)}
    busy = steal = 0
    running = 0
    with open("/proc/stat") as f:
        for line in f:
            name, _, rest = line.partition(" ")
            if name in cpus:
                # user nice system idle iowait irq softirq steal (guest time is within user)
                v = [int(x) for x in rest.split()[:8]]
                busy += v[0] + v[1] + v[2] + v[5] + v[6]
                steal += v[7] if len(v) > 7 else 0
            elif name == "procs_running":
                running = int(rest)
    # this thread only: the process's other threads (a service's checks) are neighbours too
    me = resource.getrusage(resource.RUSAGE_THREAD)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    return Snapshot(time.monotonic(), busy / _TICK, steal / _TICK, running, ours)


def conditions(before: Snapshot, after: Snapshot, threads: int) -> dict:
    """The figures of one run between two snapshots: what it used, what it could have used
    with `threads` threads, and what others took (all CPU seconds)."""
    wall = after.wall - before.wall
    cores = min(threads, len(os.sched_getaffinity(0)))
    ours = after.ours - before.ours
    steal = max(0.0, after.steal - before.steal)
    others = max(0.0, after.busy - before.busy - ours)
    return {"wall": wall, "cores": cores, "cpu": ours, "possible": cores * wall,
            "others_cpu": others, "steal": steal,
            "others_running": max(0, max(before.running, after.running) - 1)}


def disturbed(c: dict) -> str | None:
    """Why a run with figures `c` (from `conditions`) was disturbed by other programs, or
    None."""
    missed = c["possible"] - c["cpu"]
    foreign = c["others_cpu"] + c["steal"]
    if missed <= SHORT_SHARE * c["possible"] or foreign < max(FOREIGN_SHARE * missed,
                                                              MIN_FOREIGN_SECONDS):
        return None
    steal = f", {c['steal']:.2f} s stolen by the hypervisor" if c["steal"] >= 0.05 else ""
    return (f"other programs used {foreign:.2f} CPU-s during the {c['wall']:.2f} s run while "
            f"it got {c['cpu']:.2f} of {c['possible']:.2f}{steal}; "
            f"{c['others_running']} other runnable processes")
