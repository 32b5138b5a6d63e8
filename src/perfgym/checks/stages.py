"""Optimization techniques, how to spot them in a kernel, and which stage allows which
(Table I of "Improving HPC Code Generation Capability of LLMs via Online RL with Real-Machine Benchmark Rewards").

The paper enforces SIMD, OpenMP and prefetch by regex; register and cache blocking are detected
too (reported in every Outcome) but enforced only with `strict=True`, because a loop tiled by a
constant is easy to miss or to over-report.
"""
from __future__ import annotations

import re
from bisect import bisect_left

from ..extract import strip_comments

TECHNIQUES = ("register_blocking", "cache_blocking", "simd", "openmp", "prefetch")
LABELS = {"register_blocking": "register blocking", "cache_blocking": "cache blocking",
          "simd": "SIMD", "openmp": "OpenMP", "prefetch": "prefetch"}

# stage -> techniques allowed (Table I: each stage adds one; stage 6 allows everything)
STAGES: dict[int, frozenset[str]] = {
    1: frozenset({"register_blocking"}),
    2: frozenset({"register_blocking", "cache_blocking"}),
    3: frozenset({"register_blocking", "cache_blocking", "simd"}),
    4: frozenset({"register_blocking", "cache_blocking", "simd", "openmp"}),
    5: frozenset(TECHNIQUES),
    6: frozenset(TECHNIQUES),
}
ENFORCED = frozenset({"simd", "openmp", "prefetch"})
ENFORCED_STRICT = ENFORCED | {"cache_blocking"}

_DETECTORS: dict[str, list[re.Pattern]] = {
    "openmp": [
        re.compile(r"#\s*pragma\s+omp\s+(?!simd\b)(?!declare\s+simd)\w+"),
        re.compile(r"_Pragma\s*\(\s*\"\s*omp\s+(?!simd\b)\w+"),
        re.compile(r"\bomp_\w+\s*\("),
    ],
    "simd": [
        re.compile(r"\b_mm(?:256|512)?_(?!prefetch\b|malloc\b|free\b)\w+\s*\("),
        re.compile(r"\b__m(?:64|128|256|512)[dih]?\b"),
        re.compile(r"#\s*pragma\s+omp\s++(?:[\w ]*\s)?simd\b"),
        re.compile(r"_Pragma\s*\(\s*\"\s*omp\s++(?:[\w ]*\s)?simd\b"),
        re.compile(r"\b(?:float|int|uint|poly)\d+x\d+(?:x\d+)?_t\b"),  # NEON types
        re.compile(r"\bv(?:ld|st)[1-4]q?_\w+\s*\(|\bv(?:fma|mla|add|mul)q_\w+\s*\("),  # NEON
        re.compile(r"\bsv(?=\w+?_[fsu](?:8|16|32|64))\w++\s*\("),  # SVE
        re.compile(r"vector_size\s*\("),
        re.compile(r"\b__builtin_ia32_\w+"),
    ],
    "prefetch": [
        re.compile(r"\b__builtin_prefetch\s*\("),
        re.compile(r"\b_mm_prefetch\s*\("),
        re.compile(r"#\s*pragma\s++\w*?\s*+prefetch"),
    ],
}

# Every rule here reads a candidate's answer, so each runs in time linear in its length: no
# pattern may rescan the text from many starting points (a loop header or a statement is found
# by its start, and its end by a lookup, never by a `[^;]*` that runs on to the end of the file).
_FOR_INIT = re.compile(r"for\s*\(\s*(?:\w+\s+)?(\w+)\s*=\s*(\w*)")  # loop variable, start
_FOR_STEP = re.compile(r"\s*(\w+)\s*\+=\s*([A-Za-z_]\w*|\d+)\s*\)")  # after the second ';'
_ACCUMULATE = re.compile(r"(?<![\w\]\.>])([A-Za-z_]\w*)\s*\+=")
_SMALL_TILE = re.compile(r"\b(?:double|float)\s+\w+\s*\[\s*(\d+)\s*\](?:\s*\[\s*(\d+)\s*\])?")


def detect_techniques(code: str, undefined_symbols: frozenset[str] = frozenset(),
                      mnemonics: frozenset[str] = frozenset()) -> dict[str, str]:
    """technique -> the evidence (a snippet), for every technique found in the kernel."""
    code = strip_comments(code)
    found: dict[str, str] = {}
    for tech, patterns in _DETECTORS.items():
        for p in patterns:
            if m := p.search(code):
                found[tech] = _line_of(code, m.start())
                break
    # Object-level evidence cannot be hidden behind macros.
    if "openmp" not in found:
        gomp = sorted(s for s in undefined_symbols if s.startswith(("GOMP_", "omp_")))
        if gomp:
            found["openmp"] = f"calls {gomp[0]} (object file)"
    if "prefetch" not in found:
        pf = sorted(m for m in mnemonics if m.startswith("prefetch"))
        if pf:
            found["prefetch"] = f"{pf[0]} instruction (object file)"

    loops, starts = _step_loops(code)
    for var, step in loops:
        # a loop stepping by a block and an inner loop starting at its variable: a tile
        if (not step.isdigit() or int(step) >= 8) and var in starts:
            found["cache_blocking"] = f"loop over {var} in steps of {step}"
            break
    accumulators = _scalar_accumulators(code)
    small_step = any(step.isdigit() and 2 <= int(step) <= 16 for _, step in loops)
    tiles = [m for m in _SMALL_TILE.finditer(code)
             if int(m.group(1)) <= 16 and (m.group(2) is None or int(m.group(2)) <= 32)]
    if (small_step and len(accumulators) >= 2) or len(accumulators) >= 4 or tiles:
        what = (f"{len(accumulators)} scalar accumulators" if accumulators and not tiles
                else f"register tile {tiles[0].group(0)}" if tiles else "unrolled accumulators")
        found["register_blocking"] = what
    return found


def _step_loops(code: str) -> tuple[list[tuple[str, str]], set[str]]:
    """([(variable, step)] of the `for (i = ...; ...; i += step)` loops, {what any for loop's
    variable starts at})."""
    semicolons = [m.start() for m in re.finditer(";", code)]
    loops, starts, end = [], set(), 0
    for m in _FOR_INIT.finditer(code):
        starts.add(m.group(2))
        k = bisect_left(semicolons, m.end())
        if m.start() < end or k + 1 >= len(semicolons):
            continue
        step = _FOR_STEP.match(code, semicolons[k + 1] + 1)  # the header's third clause
        if step and step.group(1) == m.group(1):
            loops.append((m.group(1), step.group(2)))
            end = step.end()
    return loops, starts


def _scalar_accumulators(code: str) -> set[str]:
    """Names of scalars a statement accumulates a product into (`acc += a[i] * b[j];`)."""
    found = set()
    for statement in code.split(";")[:-1]:  # the text after the last ';' ends no statement
        if (m := _ACCUMULATE.search(statement)) and statement.find("*", m.end()) >= 0:
            found.add(m.group(1))
    return found


def stage_violations(found: dict[str, str], stage: int, strict: bool = False) -> list[str]:
    """Reasons the techniques found break the stage's rules (empty when they do not)."""
    if stage not in STAGES:
        raise ValueError(f"stage {stage} does not exist: stages are 1-6")
    enforced = ENFORCED_STRICT if strict else ENFORCED
    allowed = STAGES[stage]
    return [f"stage {stage} does not allow {LABELS[t]} (found: {found[t]})"
            for t in TECHNIQUES if t in found and t in enforced and t not in allowed]


def missing_techniques(found: dict[str, str], required: tuple[str, ...]) -> list[str]:
    """Reasons a kernel breaks its task's `require` rule (ParEval's OpenMP problems must use
    OpenMP): one per required technique it does not use."""
    return [f"the task requires {LABELS[t]}, and the kernel uses none (ParEval's rule for "
            f"parallel problems)" for t in required if t not in found]


def describe_stage(stage: int) -> tuple[list[str], list[str]]:
    """(allowed, forbidden) technique labels for prompts."""
    allowed = [LABELS[t] for t in TECHNIQUES if t in STAGES[stage]]
    forbidden = [LABELS[t] for t in TECHNIQUES if t not in STAGES[stage] and t in ENFORCED]
    return allowed, forbidden


def _line_of(code: str, pos: int) -> str:
    start = code.rfind("\n", 0, pos) + 1
    end = code.find("\n", pos)
    line = code[start:end if end >= 0 else None].strip()
    return line if len(line) <= 80 else line[:77] + "..."
