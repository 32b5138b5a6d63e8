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
    source is read instead, where macros and token pasting have already been expanded;
  * no pragmas or attributes that change the compiler flags (a kernel at --opt O0 lifting itself
    to O3), also read from the preprocessed source: there _Pragma and pasted names are plain.
"""
from __future__ import annotations

import os
import re
import subprocess
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .source import FLAG_PRAGMA, flag_attributes, flags_reason, has_raw_string, search_word_start

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
    # gcc fuses sin and cos of one value into sincos; std::abs/exp/... of std::complex
    re.compile(r"^(sincos|c(?:abs|arg|exp|log|pow|sqrt|sin|cos|tan|sinh|cosh|tanh|proj))[fl]?$"),
]
_ALLOWED_SECTION = re.compile(
    r"^(\.text|\.data|\.bss|\.rodata|\.comment|\.note|\.eh_frame|\.rela?\.(text|data|rodata|"
    r"eh_frame|debug|ldata|lrodata)|\.symtab|\.strtab|\.shstrtab|\.group|\.tbss|\.tdata|\.debug|"
    r"\.gcc_except_table|\.lbss|\.ldata|\.lrodata)")
_FORBIDDEN_MNEMONICS = frozenset({"syscall", "sysenter", "int", "int3", "into", "rdtsc", "rdtscp",
                                  "rdpmc", "wrfsbase", "wrgsbase", "svc", "mrs"})


# (searched with search_word_start, which supplies the leading \b)
_FRAME_BUILTINS = re.compile(r"(__builtin_(?:return_address|frame_address|extract_return_addr|"
                             r"dwarf_cfa|stack_save|eh_return|unwind_init|longjmp|setjmp))\b")


CANDIDATE_FILE = "candidate.c"  # the name the build gives the kernel's source
# gcc's line markers: '# 12 "file" 1 3 4' (flags: 1 enter an include, 2 return, 3 system header)
_LINEMARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"((?: \d+)*)$')
# what gcc -dI echoes before it enters an included file (the kernel's own text never starts a
# line with '#': gcc -E puts a blank before a '#' that comes out of a macro)
_INCLUDE_ECHO = re.compile(r"^#(?:include|include_next|import)\b")
_NO_DIRECTIVES = "line directives are not allowed in a kernel"
# names gcc and clang give the kernel's file and their own preamble
_OWN_NAMES = (CANDIDATE_FILE, "<built-in>", "<command-line>", "<command line>")


def audit_preprocessed(text: str, compiler: str = "gcc", flags: list[str] | tuple = ()
                       ) -> str | None:
    """None when the preprocessed candidate (gcc -E -dI output, built with these flags) is
    acceptable, else a reason: no frame-walking builtin, no pragma or attribute that changes
    the compiler flags, no line directive."""
    lines, reason = lines_by_file(text, system_include_dirs(compiler, tuple(flags)))
    if reason:
        return reason
    shown = " ".join(f for f in flags if f.startswith(("-O", "-m")))
    if has_raw_string(text):  # may span lines and fake a line marker for this reader
        return 'raw string literals (R"(...)") are not allowed in a kernel'
    # The system headers set their own target pragmas and attributes: only those really
    # written on that line of the header are theirs. Any other came from the kernel, maybe
    # from its macros expanding inside a header (where a pragma lasts past the header's end,
    # and a whole O3 function can be defined).
    for path, number, line in lines:
        if "pragma" not in line:  # (cheap: most of 60,000 header lines)
            continue
        if (m := FLAG_PRAGMA.match(line)) and not (path and _header_has(path, number, line)):
            return flags_reason("#pragma " + " ".join(m.group(1).split()), shown)
    starts, offset = [], 0
    for _, _, line in lines:
        starts.append(offset)
        offset += len(line) + 1
    for at, name in flag_attributes("\n".join(line for _, _, line in lines)):
        path, number, _ = lines[bisect_right(starts, at) - 1]
        if not (path and _header_spells(path, number, name)):
            return flags_reason(f"the {name.strip('_')} attribute", shown)
    if m := search_word_start(_FRAME_BUILTINS, text):
        return f"{m.group(1)} is not allowed in a kernel (it exposes the caller's frames)"
    return None


def lines_by_file(text: str, system_dirs: tuple[str, ...]
                  ) -> tuple[list[tuple[str | None, int, str]], str | None]:
    """Each line of gcc -E -dI output as (system header path or None for the kernel's own text,
    line number in that file, text), following the line markers; and a reason when the markers
    show a line directive of the kernel's, which could dress its code up as a system header's."""
    out: list[tuple[str | None, int, str]] = []
    stack: list[str] = []  # the include stack, innermost last
    number, echoed, started = 0, False, False
    header = None  # the system header the lines come from, None for the kernel's own
    for i, line in enumerate(text.split("\n")):
        # (the cheap test first: a 60,000-line header dump has a few thousand markers)
        m = _LINEMARKER.match(line) if line.startswith("# ") else None
        if not m:
            out.append((header, number, line))
            number += 1
            echoed = line.startswith("#") and bool(_INCLUDE_ECHO.match(line))
            continue
        name, marker_flags = m.group(2), m.group(3).split()
        system = _is_system(name, system_dirs)
        # line 2 of the output may name the working directory ('# 1 "/dir//"', with -g)
        if not (system or name in _OWN_NAMES or (i == 1 and name.endswith("//"))):
            return out, f"the kernel names the file {name!r} in a line directive; {_NO_DIRECTIVES}"
        started = started or name == CANDIDATE_FILE and i > 0  # past gcc's own preamble
        if "1" in marker_flags:
            # a real #include is echoed first; a '# 1 "header" 1' the kernel wrote is not
            if started and not echoed:
                return out, f"the kernel enters {name} with a line marker; {_NO_DIRECTIVES}"
            stack.append(name)
            echoed = False
        elif "2" in marker_flags:
            if len(stack) < 2 or stack[-2] != name:
                return out, f"the kernel's line markers do not nest; {_NO_DIRECTIVES}"
            stack.pop()
        else:
            # gcc only enters a header with flag 1; an unflagged switch into one is a #line
            if system and stack and stack[-1] != name:
                return out, (f"the kernel claims its code is in the system header {name}; "
                             f"{_NO_DIRECTIVES}")
            stack[-1:] = [name]
        number = int(m.group(1))
        top = stack[-1] if stack else ""
        header = top if _is_system(top, system_dirs) else None
    return out, None


@lru_cache(maxsize=None)
def system_include_dirs(compiler: str, flags: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The compiler's <...> search directories (absolute, normalized), from gcc -v."""
    r = subprocess.run([compiler, *flags, "-xc", "-E", "-v", os.devnull],
                       capture_output=True, text=True)
    dirs, inside = [], False
    for line in r.stderr.splitlines():
        if line.startswith("#include <...> search starts here"):
            inside = True
        elif line.startswith("End of search list"):
            break
        elif inside:
            d = line.strip().split(" (")[0]  # "(framework directory)" on macOS
            if os.path.isabs(d):
                dirs.append(os.path.normpath(d))
    return tuple(dirs)


@lru_cache(maxsize=4096)
def _is_system(name: str, system_dirs: tuple[str, ...]) -> bool:
    path = os.path.normpath(name)
    return (os.path.isabs(path) and any(path.startswith(d + os.sep) for d in system_dirs)
            and os.path.isfile(path))


@lru_cache(maxsize=256)
def _header_lines(path: str) -> tuple[str, ...]:
    return tuple(Path(path).read_text(errors="replace").split("\n"))


def _header_line(path: str, number: int) -> str:
    """Line `number` of a header, without comments ('' past its end)."""
    lines = _header_lines(path)
    return re.sub(r"/\*.*?\*/|//.*", "", lines[number - 1]) if 1 <= number <= len(lines) else ""


def _header_spells(path: str, number: int, name: str) -> bool:
    """Whether line `number` of the header spells the attribute name, itself or through a macro
    the header defines with it (clang's __DEFAULT_FN_ATTRS holds __target__("avx"))."""
    words = set(re.findall(r"\w+", _header_line(path, number)))
    return name in words or bool(words & _macros_spelling(path, name))


@lru_cache(maxsize=1024)
def _macros_spelling(path: str, name: str) -> frozenset[str]:
    text = re.sub(r"\\[ \t]*\n", "", "\n".join(_header_lines(path)))
    return frozenset(re.findall(rf"^[ \t]*#[ \t]*define[ \t]+(\w+).*\b{name}\b", text, re.M))


def _header_has(path: str, number: int, line: str) -> bool:
    """Whether line `number` of the header reads `line`, blanks aside."""
    return re.sub(r"\s+", "", _header_line(path, number)) == re.sub(r"\s+", "", line)


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
            # e.g. "0000000000000000 g     F .text  00000000000000a5 matmul_optimized", with
            # ".hidden" (or .protected, .internal) before the name of a symbol of that
            # visibility: hidden is still global to the link, so it is read like any other
            m = re.match(r"^[0-9a-f]+\s(.{7})\s(\S+)\s+(?:[0-9a-f]+\s+)?"
                         r"(?:\.(?:hidden|protected|internal)\s+)?(\S+)$", line)
            if not m:
                continue
            flags, section, name = m.groups()
            if section == "*UND*":
                undefined.add(name)
            elif flags[4] in "iI":
                defined.append(f"{name}:i")  # GNU indirect function
            elif flags[0] in "gu" or flags[1] == "w" or section == "*COM*":
                kind = "u" if flags[0] == "u" else "W" if flags[1] == "w" else "G"
                defined.append(f"{name}:{kind}")
        elif part == "code":
            m = re.match(r"^\s+[0-9a-f]+:\s+(.*)$", line)
            if m:  # every bare word of the instruction: prefixes cannot hide a mnemonic
                mnemonics.update(t for t in m.group(1).split()
                                 if re.fullmatch(r"[a-z][a-z0-9.]*", t))
    return ObjectFacts(defined, frozenset(undefined), sections, frozenset(mnemonics))


# C++: what the runtime and the standard containers call (allocation, the throw helpers
# std::vector uses, exception handling: an exception escaping the entry ends the run in the
# shim). Not __cxa_atexit or guard variables: those are static objects, state between calls.
CPP_ALLOWED_CALLS = frozenset("""
__gxx_personality_v0 _Unwind_Resume __cxa_begin_catch __cxa_end_catch __cxa_rethrow
__cxa_allocate_exception __cxa_free_exception __cxa_throw __cxa_call_terminate
_ZSt9terminatev __cxa_pure_virtual
""".split())
_CPP_ALLOWED_CALL_PATTERNS = [
    re.compile(r"^_Z(nw|na|dl|da)[a-zA-Z0-9_]*$"),  # operator new/delete, from the runtime
    re.compile(r"^_ZSt\d+__throw_\w+$"),  # std::__throw_length_error and kin
    re.compile(r"^_ZTI\w+$"),  # type_info of a thrown type
]
# Weak definitions the compiler makes for inline functions and template instantiations. Only
# mangled names: a weak C name (clock_gettime) would take the place of libc's in the harness.
_OPERATOR_NEW_DELETE = re.compile(r"^_Z(nw|na|dl|da)")
# Weak hidden data g++ emits where exceptions pass: DW.ref.<symbol>, a pointer to the
# personality routine or a caught type's type_info. The name is no C or C++ identifier, so no
# kernel spells it (asm labels are refused).
_CPP_COMPILER_WEAK = "DW.ref."


def audit_object(facts: ObjectFacts, entry: str, cpp: bool = False) -> str | None:
    """None when the object is acceptable, else a one-line reason. `entry` is the one symbol
    the object may define globally (for C++: the mangled name, or the plain name of an
    extern "C" entry); C++ names are shown demangled."""
    defined = {d.rsplit(":", 1)[0] for d in facts.defined_globals}
    shown = demangle if cpp else str
    for d in facts.defined_globals:
        name, kind = d.rsplit(":", 1)
        if kind in ("i", "u"):
            return (f"symbol {shown(name)} is an indirect/unique symbol; only a plain entry is "
                    "allowed")
        if cpp and _OPERATOR_NEW_DELETE.match(name):
            return (f"the kernel defines {name} (operator new or delete), which would replace "
                    "the harness's allocator")
        if cpp and kind == "W" and (name.startswith("_Z") or name.startswith(_CPP_COMPILER_WEAK)):
            continue  # an inline function or template instance, private to the kernel's calls
        if name == entry:
            continue
        if cpp and entry not in defined and _same_function_name(name, entry):
            return (f"the kernel's entry is {shown(name)}, but the task calls {shown(entry)}: "
                    "the parameter types must be the task's")
        return (f"the kernel defines the global symbol {shown(name)}; only the entry "
                f"{shown(entry)} may be global (make helpers static)")
    if entry not in defined:
        return f"the compiled kernel does not define {shown(entry)}"
    for name in sorted(facts.undefined):
        if cpp and (name in CPP_ALLOWED_CALLS or
                    any(p.match(name) for p in _CPP_ALLOWED_CALL_PATTERNS)):
            continue
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


def _function_name(symbol: str) -> str:
    """The unqualified function name of a C name or a mangled global function (_Z<len><name>)."""
    m = re.match(r"_Z(\d+)", symbol)
    return symbol[m.end():m.end() + int(m.group(1))] if m else symbol


def _same_function_name(a: str, b: str) -> bool:
    return _function_name(a) == _function_name(b)


@lru_cache(maxsize=1024)
def demangle(symbol: str) -> str:
    """A C++ symbol as c++filt spells it (matmul_optimized(double*, int)); C names, and every
    name when c++filt is missing, as they are."""
    if not symbol.startswith("_Z"):
        return symbol
    try:
        r = subprocess.run(["c++filt", symbol], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return symbol
    return r.stdout.strip() or symbol if r.returncode == 0 else symbol
