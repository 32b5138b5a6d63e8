"""The instruction mix of the candidate's object (objdump -d, read on the host: nothing of the
candidate runs): the vector width it uses, FMA count, packed against scalar floating-point
operations, and the same for its hot loop, guessed cheaply as the innermost backward-branch loop
with the most floating-point work.

Registers name the width (xmm 16 bytes, ymm 32, zmm 64), so no ISA is assumed: an AVX2 machine
simply shows no zmm. The CPU's widest registers come from the machine's ISA flags."""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

NAME = "instructions"
OBJECT = "candidate.o"

# x86 floating-point arithmetic (AT&T mnemonics, AVX "v" prefix optional): (p)acked or
# (s)calar, on (s)ingle, (d)ouble or (h)alf
_FP = re.compile(r"^v?(?:add|sub|mul|div|sqrt|max|min|"
                 r"f(?:n?m(?:add|sub)|maddsub|msubadd)\d{3})([ps])([sdh])$")
_SCALAR_MOVE = re.compile(r"^v?movs[sdh]$")
_GATHER = re.compile(r"^vgather")
_MEMORY = re.compile(r"(?:^|,)\s*[-\w$]*\(%")  # an operand like -0x10(%rax) or (%rdi,%rbx,1)
_LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
_FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_TARGET = re.compile(r"^([0-9a-f]+) <")
WIDTHS = (("zmm", 64), ("ymm", 32), ("xmm", 16))


@dataclass
class Insn:
    address: int
    mnemonic: str
    operands: str
    function: str


@dataclass
class Mix:
    """Counts over a stretch of instructions."""

    instructions: int = 0
    packed: int = 0
    scalar: int = 0
    fma: int = 0
    scalar_loads: int = 0  # scalar FP values read from memory (moves and memory operands)
    gathers: int = 0
    registers: dict[str, int] = field(default_factory=lambda: {r: 0 for r, _ in WIDTHS})
    packed_by_width: dict[str, int] = field(default_factory=lambda: {r: 0 for r, _ in WIDTHS})

    def add(self, insn: Insn) -> None:
        self.instructions += 1
        m, ops = insn.mnemonic, insn.operands
        for reg, _ in WIDTHS:
            if f"%{reg}" in ops:
                self.registers[reg] += 1
        fp = _FP.match(m)
        if fp and fp[1] == "p":
            self.packed += 1
            widest = next((r for r, _ in WIDTHS if f"%{r}" in ops), "xmm")
            self.packed_by_width[widest] += 1
        elif fp:
            self.scalar += 1
            if _MEMORY.search(ops):
                self.scalar_loads += 1
        if fp and m.lstrip("v").startswith(("fm", "fnm")):
            self.fma += 1
        if _SCALAR_MOVE.match(m) and _MEMORY.match(ops.split(",")[0] + ","):
            self.scalar_loads += 1  # AT&T: the source comes first
        if _GATHER.match(m):
            self.gathers += 1

    @property
    def widest(self) -> str | None:
        return next((r for r, _ in WIDTHS if self.packed_by_width[r]), None)


def unavailable(ctx) -> str | None:
    if ctx.workdir is None or not (ctx.workdir / OBJECT).is_file():
        return "no object file (not a C/C++ kernel)"
    if shutil.which("objdump") is None:
        return "objdump is not installed (apt-get install binutils)"
    return None


def run(ctx) -> list[str]:
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(ctx.workdir / OBJECT)],
                          capture_output=True, text=True, timeout=30).stdout
    fmt = re.search(r"file format (\S+)", text)
    if fmt and "x86-64" not in fmt[1]:
        return [f"the instruction mix is read for x86-64 only; this object is {fmt[1]}"]
    # the CPU's widest registers matter only when the build may use them all
    isa = (ctx.outcome.machine or {}).get("isa") or [] if ctx.config.march == "native" else []
    return describe(parse(text), isa)


def parse(disassembly: str) -> list[list[Insn]]:
    """The instructions of each code section, in address order."""
    sections: list[list[Insn]] = []
    function = "?"
    for raw in disassembly.splitlines():
        if raw.startswith("Disassembly of section"):
            sections.append([])
        elif m := _FUNCTION.match(raw):
            function = m[1]
        elif (m := _LINE.match(raw)) and sections:
            sections[-1].append(Insn(int(m[1], 16), m[2], m[3], function))
    return sections


def innermost_loops(code: list[Insn]) -> list[list[Insn]]:
    """Loops found by their backward branches (a jump to an earlier address), keeping those
    that hold no other loop."""
    spans = []
    for insn in code:
        if insn.mnemonic.startswith("j") and (t := _TARGET.match(insn.operands)):
            target = int(t[1], 16)
            if target <= insn.address:
                spans.append((target, insn.address))
    inner = [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1]
                                         for o in spans)]
    return [[i for i in code if a <= i.address <= b] for a, b in sorted(set(inner))]


def describe(sections: list[list[Insn]], isa: list[str]) -> list[str]:
    """The lines: the whole object, then its hot loop. `isa`: the CPU's flags, to say when the
    kernel leaves wider registers unused (empty: say nothing of it)."""
    whole = Mix()
    for code in sections:
        for insn in code:
            whole.add(insn)
    lines = [_summary("whole kernel", whole, isa)]
    loops = [(_mix(loop), loop) for code in sections for loop in innermost_loops(code)]
    loops = [(m, loop) for m, loop in loops if m.packed + m.scalar]
    if loops:
        hot, loop = max(loops, key=lambda ml: (ml[0].packed + ml[0].scalar, ml[0].instructions))
        where = f"{loop[0].function} at 0x{loop[0].address:x}-0x{loop[-1].address:x}"
        lines.append(_summary(f"hot loop (innermost, most FP work; {where})", hot, isa))
        if hot.scalar_loads:
            lines.append(f"{hot.scalar_loads} scalar loads in the hot loop: each reads one "
                         "element; packed loads or broadcasts read a vector's worth")
    else:
        lines.append("no loop with floating-point work found (straight-line code, or a "
                     "kernel without floating point)")
    return lines


def _mix(code: list[Insn]) -> Mix:
    m = Mix()
    for insn in code:
        m.add(insn)
    return m


def _summary(label: str, m: Mix, isa: list[str]) -> str:
    if m.packed + m.scalar == 0:
        return f"{label}: {m.instructions} instructions, no floating-point arithmetic"
    widths = ", ".join(f"{m.packed_by_width[r]} {r}" for r, _ in WIDTHS if m.packed_by_width[r])
    text = (f"{label}: {m.packed} packed FP ops ({widths or 'none'}), {m.scalar} scalar, "
            f"{m.fma} FMA" + (f", {m.gathers} gathers" if m.gathers else ""))
    cpu = _cpu_widest(isa)
    if cpu and m.widest != cpu and label == "whole kernel":
        text += f"; this CPU has {cpu} ({dict(WIDTHS)[cpu]}-byte vectors)"
    return text


def _cpu_widest(isa: list[str]) -> str | None:
    flags = set(isa)
    if "avx512f" in flags:
        return "zmm"
    if flags & {"avx", "avx2"}:
        return "ymm"
    if flags & {"sse2", "sse4_2"}:
        return "xmm"
    return None
