"""Profiling feedback: measured facts about a kernel, in a few lines a model can act on.

Each provider is one module with NAME, `unavailable(ctx)` (why it cannot run here, or None) and
`run(ctx)` (its lines). `collect` runs the requested providers in order; one that cannot run
says why and hands over to its fallback, so a VM without hardware counters still gets the
static facts. Every provider's text is bounded whatever the tools print. The result maps
provider -> lines, plus "ran": which providers ran and which fell through.

    vectorization  gcc's -fopt-info report: which loops of candidate.c vectorized, which not, why
    instructions   objdump of the object: vector width, FMA, packed vs scalar, the hot loop
    roofline       the measured rate against the roof that applies (from the Outcome)
    scaling        one thread against all (a second timed run: only when asked)
    cachegrind     simulated cache misses at a small size (slow: only when asked)
    perf           hardware counters, where the machine has them (most VMs do not)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import cachegrind, instructions, perf, roofline, scaling, vectorization

# in the order their lines are shown
PROVIDERS = {m.NAME: m for m in (vectorization, instructions, roofline, scaling, cachegrind,
                                 perf)}
# When a provider cannot run, the one that stands in for it (the counters' questions get the
# static instruction mix: what the hardware would have been asked to do)
FALLBACK = {"perf": "instructions", "cachegrind": "instructions"}
DEFAULT = ("perf", "vectorization", "instructions", "roofline")  # what `--profile` alone asks
MAX_LINES = 6  # per provider
MAX_CHARS = 160  # per line


@dataclass
class Context:
    """What a provider may read: the evaluation and its build directory (still there)."""

    task: Any
    code: str
    size: dict[str, int]
    config: Any
    outcome: Any
    workdir: Path | None
    # how to evaluate the kernel again (the scaling provider's one-thread run): handed in by
    # the evaluator, so profiling never imports it back
    evaluate: Any = None


def parse(text: str | None) -> tuple[str, ...]:
    """`--profile` values: "default" or "" for DEFAULT, else names separated by commas (and
    "default" among them for the default set). Raises ValueError naming the unknown one."""
    names: list[str] = []
    for part in (text or "default").split(","):
        part = part.strip()
        for name in (DEFAULT if part in ("", "default") else (part,)):
            if name not in PROVIDERS:
                raise ValueError(f"--profilers: no provider {name!r}; choose from "
                                 f"{', '.join(PROVIDERS)} or 'default'")
            if name not in names:
                names.append(name)
    return tuple(names)


def collect(ctx: Context, names: tuple[str, ...]) -> dict[str, str]:
    profile: dict[str, str] = {}
    ran, notes, tried = [], [], set()
    queue = list(names)
    while queue:
        name = queue.pop(0)
        if name in tried:
            continue
        tried.add(name)
        provider = PROVIDERS[name]
        why = provider.unavailable(ctx)
        if why is None:
            try:
                profile[name] = "\n".join(bounded(provider.run(ctx)))
                ran.append(name)
                continue
            except Exception as exc:  # a provider's failure is a note, never a lost verdict
                why = f"failed: {type(exc).__name__}: {exc}"
        stand_in = FALLBACK.get(name)
        notes.append(f"{name} unavailable ({why})"
                     + (f", fell back to {stand_in}" if stand_in else ""))
        if stand_in and stand_in not in tried:
            queue.insert(0, stand_in)
    profile["ran"] = "\n".join(bounded([f"ran: {', '.join(ran) or 'none'}", *notes]))
    return profile


def attach(prepared, outcome, evaluate) -> None:
    """Profile a measured candidate while its build directory still exists (evaluate.measure
    calls this before the backend cleans up, with `evaluate` for a provider that must run the
    kernel again) and store the lines on its Outcome."""
    ctx = Context(prepared.task, prepared.code, prepared.size, prepared.config, outcome,
                  prepared.workdir, evaluate)
    outcome.profile = collect(ctx, tuple(prepared.config.profile))


def bounded(lines: list[str]) -> list[str]:
    """At most MAX_LINES lines of at most MAX_CHARS characters, whatever a tool printed."""
    lines = [" ".join(str(ln)[:4 * MAX_CHARS].split()) for ln in lines]  # (cut before split)
    lines = [ln if len(ln) <= MAX_CHARS else ln[:MAX_CHARS - 3] + "..." for ln in lines if ln]
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES - 1] + [f"(+{len(lines) - MAX_LINES + 1} more lines)"]
    return lines


def render(profile: dict[str, str] | None) -> list[str]:
    """The profile as prompt/console lines: each provider's lines under its name, "ran" last."""
    if not profile:
        return []
    out = []
    for name in [*PROVIDERS, "ran"]:
        label = "profile" if name == "ran" else name
        out += [f"[{label}] {line}" for line in profile.get(name, "").splitlines()]
    return out
