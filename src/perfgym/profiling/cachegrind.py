"""Simulated cache misses (valgrind's cachegrind) of one kernel call at a small size: what
counters would say, on machines without them. Slow (the run is simulated, ~50x), so only when
asked. The harness runs under valgrind in the sandbox, in a directory of its own; only the
candidate's own functions are counted, not the harness around them."""
from __future__ import annotations

import dataclasses
import shutil
import subprocess

NAME = "cachegrind"
MAX_BYTES = 2 << 20  # the largest working set simulated
SECONDS = 120.0


def unavailable(ctx) -> str | None:
    if ctx.workdir is None or not (ctx.workdir / "run").is_file():
        return "no built harness (not a C/C++ kernel)"
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (apt-get install valgrind)"
    if ctx.outcome.status.value in ("TIMEOUT", "RUNTIME_ERROR"):
        return f"the kernel did not run cleanly ({ctx.outcome.status.value})"
    return None


def small_size(task) -> dict[str, int]:
    """The task's largest size whose data fits in MAX_BYTES (else its smallest)."""
    sizes = task.sizes("all")
    fitting = [s for s in sizes if task.total_bytes(s) <= MAX_BYTES]
    return max(fitting, key=task.total_bytes) if fitting else task.sizes("smallest")[0]


def run(ctx) -> list[str]:
    from .. import sandbox
    config = ctx.config.replace(threads=1)  # one simulated cache: one thread
    size = small_size(ctx.task)
    cg = sandbox.make_workdir()  # a directory of its own: the build's files stay as they are
    try:
        shutil.copy(ctx.workdir / "run", cg / "run")
        functions = _functions(ctx.workdir / "candidate.o")  # the kernel's, not the harness's
        lines = _simulate(ctx.task, config, size, cg, functions)
        if lines is None and "avx512f" in ((ctx.outcome.machine or {}).get("isa") or []):
            # valgrind (3.19 and later alike) decodes no AVX-512: simulate the same source
            # built without it, and say so
            rebuilt = _build_without_avx512(ctx, config, cg)
            lines = _simulate(ctx.task, config, size, cg, functions) if rebuilt else None
            if lines:
                lines.append("valgrind cannot run AVX-512: this is the kernel built with "
                             "-mno-avx512f")
        if lines is None:
            raise RuntimeError("valgrind cannot decode this kernel's instructions")
        return lines
    finally:
        shutil.rmtree(cg, ignore_errors=True)


def _build_without_avx512(ctx, config, cg) -> bool:
    from ..backends import backend_for
    from ..backends.c import build as cbuild
    for stale in cg.iterdir():
        stale.unlink()
    flags = config.replace(extra_flags=(*config.extra_flags, "-mno-avx512f"), profile=())
    return cbuild.build(ctx.task, ctx.code, flags, cg, backend_for(ctx.task).source).ok


def _simulate(task, config, size, cg, functions: set[str]) -> list[str] | None:
    """One check call under cachegrind in `cg` (which holds `run`); None when valgrind met an
    instruction it cannot decode."""
    import numpy as np

    from .. import sandbox
    from ..backends.c import build as cbuild
    from ..tasks import format_size
    rng = np.random.default_rng(0)
    inputs = cbuild.InputSets([cbuild.make_inputs(task, size, rng) for _ in range(2)])
    cbuild.write_manifest(task, size, inputs, config, cg, 1)
    limits = cbuild.run_limits(task, size, config)
    limits = dataclasses.replace(limits, wall_seconds=SECONDS, cpu_seconds=int(SECONDS) + 5,
                                 # valgrind's own mappings; its messages on stderr
                                 address_space=max(limits.address_space, 16 << 30),
                                 output_bytes=max(limits.output_bytes, 1 << 20))
    (cg / "cg.out").unlink(missing_ok=True)
    result = sandbox.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes",
                          "--cachegrind-out-file=cg.out", "./run", "manifest.txt", "check"],
                         cg, limits, env=cbuild.run_env(config))
    if "unhandled instruction" in result.stderr or "SIGILL" in result.stderr:
        return None
    if result.timed_out:
        raise RuntimeError(f"the simulated run took over {SECONDS:.0f} s")
    if result.returncode != 0 or not (cg / "cg.out").is_file():
        raise RuntimeError(f"the simulated run failed (status {result.returncode}): "
                           + (result.stderr.strip().splitlines() or ["no output"])[-1][:100])
    return summarize((cg / "cg.out").read_text(errors="replace"), functions,
                     format_size(size))


def _functions(obj) -> set[str]:
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)],
                         capture_output=True, text=True, timeout=30).stdout
    return {ln.split("<", 1)[1].rstrip(">:") for ln in out.splitlines()
            if ln.endswith(">:") and "<" in ln}


def summarize(profile: str, functions: set[str], size: str) -> list[str]:
    """Misses of the candidate's functions, from a cachegrind.out file."""
    events: list[str] = []
    totals: dict[str, int] = {}
    counting = False
    for line in profile.splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("fn="):
            counting = line[3:].strip() in functions
        elif counting and line[:1].isdigit():
            numbers = line.split()[1:]  # after the line number
            for name, value in zip(events, numbers):
                totals[name] = totals.get(name, 0) + int(value)
    if not totals.get("Ir"):
        return [f"cachegrind saw none of the kernel's functions run at {size}"]
    reads, writes = totals.get("Dr", 0), totals.get("Dw", 0)
    d1 = totals.get("D1mr", 0) + totals.get("D1mw", 0)
    ll = totals.get("DLmr", 0) + totals.get("DLmw", 0)
    data = max(reads + writes, 1)
    return [f"simulated one call at {size}: {totals['Ir']:,} instructions, "
            f"{data:,} data accesses",
            f"L1 data misses {d1:,} ({d1 / data * 100:.2f}% of accesses), last-level misses "
            f"{ll:,} ({ll / data * 100:.3f}%)"]
