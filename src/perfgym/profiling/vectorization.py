"""The compiler's own vectorization report, condensed to the candidate's loops: which did and
which did not vectorize, and why, by line of candidate.c.

The build writes the report while it compiles in the sandbox (gcc's -fopt-info, see
backends/c/build.py report_flags); this module only reads that file."""
from __future__ import annotations

import re

NAME = "vectorization"
REPORT = "candidate.vec"  # in the build's work directory
MAX_LOOPS = 5  # (plus a count line: six lines in all)

# gcc: "candidate.c:6:31: optimized: loop vectorized using 16 byte vectors"
_RECORD = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?:\d+:)?\s*"
                     r"(?P<kind>optimized|missed|note):\s*(?P<msg>.*)$")
_WIDTH = re.compile(r"using (\d+) byte vectors")
_CALL = re.compile(r"statement clobbers memory: (?:\S+ = )?(?:__builtin_)?(\w+) \(")
# gcc's terse reasons, in words a model can act on
_PLAIN = {"multiple nested loops": "it holds another loop (gcc vectorizes innermost loops)",
          "control flow in loop": "control flow in the loop (an if, a break, or an inner loop)",
          "no vectype for stmt": "a statement has no vector form (a vector intrinsic or an "
                                 "unsupported type)"}


def unavailable(ctx) -> str | None:
    if ctx.workdir is None:
        return "no build directory (not a C/C++ kernel)"
    if not (ctx.workdir / REPORT).is_file():
        return (f"no vectorization report from {ctx.config.compiler} (gcc's -fopt-info is "
                "read; clang's report is not)")
    return None


def run(ctx) -> list[str]:
    return condense((ctx.workdir / REPORT).read_text(errors="replace"))


def condense(report: str, source: str = "candidate.c") -> list[str]:
    """One line per loop of `source` the report names, in line order: vectorized (and how
    wide) or not, with the compiler's reason."""
    loops: dict[int, dict] = {}  # line -> {"widths": set, "missed": bool, "why": [reasons]}
    pending: int | None = None  # a loop that "couldn't vectorize", waiting for its reason
    for raw in report.splitlines():
        m = _RECORD.match(raw.strip())
        if not m:
            continue
        ours = m["file"].rsplit("/", 1)[-1] == source
        line, kind, msg = int(m["line"]), m["kind"], m["msg"].strip()
        if ours and kind == "optimized" and msg.startswith("loop vectorized"):
            width = _WIDTH.search(msg)
            loops.setdefault(line, _loop())["widths"].add(int(width[1]) if width else 0)
            pending = None
        elif ours and kind == "missed" and msg.startswith("couldn't vectorize loop"):
            loops.setdefault(line, _loop())["missed"] = True
            pending = line
        elif kind == "missed" and pending is not None and (why := _reason(msg)):
            # the reason may point at a statement inside the loop, even in a header
            if why not in loops[pending]["why"]:
                loops[pending]["why"].append(why)
            pending = None
    if not loops:
        return ["the compiler reported no loops in the kernel (nothing to vectorize, or every "
                "loop was unrolled away)"]
    lines = {line: _describe(line, loop) for line, loop in loops.items()}
    if len(lines) <= MAX_LOOPS:
        return [lines[n] for n in sorted(lines)]
    # Too many to list: those that vectorized first (few), then inner loops that did not,
    # then outer loops (which gcc never vectorizes when they hold a loop: no news).
    kept = sorted(lines, key=lambda n: (_rank(loops[n]), n))[:MAX_LOOPS]
    done = sum(bool(loop["widths"]) for loop in loops.values())
    return ([f"{len(loops)} loops: {done} vectorized, {len(loops) - done} not; the "
             f"{MAX_LOOPS} that matter most:"] + [lines[n] for n in sorted(kept)])


def _describe(line: int, loop: dict) -> str:
    if loop["widths"]:
        widths = "/".join(str(w) for w in sorted(loop["widths"], reverse=True) if w)
        return f"the loop at line {line} vectorized" + (f" ({widths}-byte vectors)"
                                                        if widths else "")
    why = "; ".join(loop["why"]) or "no reason given"
    return f"the loop at line {line} did not vectorize: {why}"


def _rank(loop: dict) -> int:
    if loop["widths"]:
        return 0
    outer = any(w.startswith((_PLAIN["multiple nested loops"], "loop nest containing"))
                for w in loop["why"])
    return 2 if outer else 1


def _loop() -> dict:
    return {"widths": set(), "missed": False, "why": []}


def _reason(msg: str) -> str | None:
    """Why a loop did not vectorize, from the report line after it, without gcc's internal
    statement dumps (SSA names, MEM[...]); None when the line gives no reason."""
    if call := _CALL.search(msg):
        return f"it calls {call[1]}()"
    if "not vectorized" not in msg:
        return None
    reason = msg.split("not vectorized:", 1)[-1].strip().rstrip(".")
    reason = re.sub(r":\s*_\d+\s*=.*$", "", reason)  # "...for stmt: _107 = MEM[...]"
    return _PLAIN.get(reason, reason[:100]) or None
