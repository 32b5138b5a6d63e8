"""Audit of the candidate's compiled object: what it defines, what it calls, what it contains.

The kernel is linked into our harness, so anything it defines or calls runs with the harness's
rights. Macros cannot hide from this check: it reads the symbols and machine code gcc produced.
  * it may define exactly one global symbol, the entry (defining clock_gettime, malloc, main,
    omp_* or the harness's own symbols would hijack the measurement);
  * it may call only an allowlist: memory, math, OpenMP and compiler helpers;
  * no constructors/destructors or custom sections (code that runs before or after the harness);
  * no system-call, time-stamp or performance-counter instructions;
  * no builtins that hand out addresses of the harness's stack frames or code (they would let
    the kernel find and rewrite the timer's state); these leave no symbol, so the preprocessed
    source is read instead, where macros and token pasting have already been expanded.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ALLOWED_CALLS = frozenset("""
malloc calloc realloc free aligned_alloc posix_memalign memalign _mm_malloc _mm_free
memset memcpy memmove memcmp abs labs llabs qsort abort
__stack_chk_fail __assert_fail _GLOBAL_OFFSET_TABLE_
""".split())
_ALLOWED_CALL_PATTERNS = [
    re.compile(r"^GOMP_\w+$"),  # what gcc emits for OpenMP constructs
    re.compile(r"^omp_(get|in)_\w+$"),
    re.compile(r"^omp_set_(num_threads|dynamic|nested|max_active_levels|schedule)$"),
    re.compile(r"^omp_(init|destroy|set|unset|test)_(nest_)?lock$"),
    re.compile(r"^__[a-z]+[0-9]$"),  # libgcc arithmetic helpers (__divti3, __muldc3, ...)
    re.compile(r"^(sqrt|cbrt|exp|exp2|expm1|log|log2|log10|log1p|pow|sin|cos|tan|asin|acos|atan"
               r"|atan2|sinh|cosh|tanh|erf|erfc|fabs|floor|ceil|round|lround|trunc|rint"
               r"|nearbyint|fmod|remainder|fma|fmin|fmax|hypot|copysign|ldexp|frexp|modf"
               r"|scalbn|nan)[fl]?$"),
]
_ALLOWED_SECTION = re.compile(
    r"^(\.text|\.data|\.bss|\.rodata|\.comment|\.note|\.eh_frame|\.rela?\.(text|data|rodata|"
    r"eh_frame|debug|ldata|lrodata)|\.symtab|\.strtab|\.shstrtab|\.group|\.tbss|\.tdata|\.debug|"
    r"\.gcc_except_table|\.lbss|\.ldata|\.lrodata)")
_FORBIDDEN_MNEMONICS = frozenset({"syscall", "sysenter", "int", "int3", "into", "rdtsc", "rdtscp",
                                  "rdpmc", "wrfsbase", "wrgsbase", "svc", "mrs"})


_FRAME_BUILTINS = re.compile(r"\b(__builtin_(?:return_address|frame_address|extract_return_addr|"
                             r"dwarf_cfa|stack_save|eh_return|unwind_init|longjmp|setjmp))\b")


def audit_preprocessed(text: str) -> str | None:
    """None when the preprocessed candidate uses no frame-walking builtin, else a reason."""
    if m := _FRAME_BUILTINS.search(text):
        return f"{m.group(1)} is not allowed in a kernel (it exposes the caller's frames)"
    return None


@dataclass
class ObjectFacts:
    defined_globals: list[str]
    undefined: frozenset[str]
    sections: list[str]
    mnemonics: frozenset[str]


def inspect_object(path: Path) -> ObjectFacts:
    """Symbols, sections and instruction mnemonics of an object, from one objdump call."""
    out = subprocess.run(["objdump", "-h", "-t", "-d", "--no-show-raw-insn", str(path)],
                         capture_output=True, text=True, check=True).stdout
    defined, undefined, sections, mnemonics = [], set(), [], set()
    part = None
    for line in out.splitlines():
        if line.startswith("Sections:"):
            part = "sections"
        elif line.startswith("SYMBOL TABLE:"):
            part = "symbols"
        elif line.startswith("Disassembly of section"):
            part = "code"
        elif part == "sections":
            m = re.match(r"^\s+\d+\s+(\S+)\s+[0-9a-f]+\s", line)
            if m:
                sections.append(m.group(1))
        elif part == "symbols":
            # e.g. "0000000000000000 g     F .text  00000000000000a5 matmul_optimized"
            m = re.match(r"^[0-9a-f]+\s(.{7})\s(\S+)\s+(?:[0-9a-f]+\s+)?(\S+)$", line)
            if not m:
                continue
            flags, section, name = m.groups()
            if section == "*UND*":
                undefined.add(name)
            elif flags[4] in "iI":
                defined.append(f"{name}:i")  # GNU indirect function
            elif flags[0] in "gu" or flags[1] == "w" or section == "*COM*":
                defined.append(f"{name}:{'u' if flags[0] == 'u' else 'G'}")
        elif part == "code":
            m = re.match(r"^\s+[0-9a-f]+:\s+(.*)$", line)
            if m:  # every bare word of the instruction: prefixes cannot hide a mnemonic
                mnemonics.update(t for t in m.group(1).split()
                                 if re.fullmatch(r"[a-z][a-z0-9.]*", t))
    return ObjectFacts(defined, frozenset(undefined), sections, frozenset(mnemonics))


def audit_object(facts: ObjectFacts, entry: str) -> str | None:
    """None when the object is acceptable, else a one-line reason."""
    for d in facts.defined_globals:
        name, kind = d.rsplit(":", 1)
        if kind in ("i", "u"):
            return f"symbol {name} is an indirect/unique symbol; only a plain entry is allowed"
        if name != entry:
            return (f"the kernel defines the global symbol {name}; only {entry} may be global "
                    "(make helpers static)")
    if entry not in {d.rsplit(":", 1)[0] for d in facts.defined_globals}:
        return f"the compiled kernel does not define {entry}"
    for name in sorted(facts.undefined):
        if name not in ALLOWED_CALLS and not any(p.match(name) for p in _ALLOWED_CALL_PATTERNS):
            return (f"the kernel references {name}, which a kernel may not use (allowed: memory, "
                    "math, OpenMP)")
    for section in facts.sections:
        if section and not _ALLOWED_SECTION.match(section):
            return f"the kernel has a {section} section (code that runs outside the call)"
    bad = sorted(facts.mnemonics & _FORBIDDEN_MNEMONICS)
    if bad:
        return f"the kernel contains the instruction {bad[0]}, which a kernel may not execute"
    return None
