"""Source-level library rules: which headers, calls and constructs a kernel may use.

These give a clear message early; the object audit (audit.py) is the wall that macros and
obfuscation cannot get around.
"""
from __future__ import annotations

import re

from ..extract import strip_comments

ALLOWED_HEADERS = frozenset("""
stdlib.h stdio.h string.h math.h stdint.h stddef.h stdbool.h float.h limits.h assert.h
inttypes.h complex.h stdalign.h malloc.h mm_malloc.h omp.h
immintrin.h x86intrin.h xmmintrin.h emmintrin.h pmmintrin.h tmmintrin.h smmintrin.h
nmmintrin.h wmmintrin.h avxintrin.h avx2intrin.h avx512fintrin.h fmaintrin.h
arm_neon.h arm_sve.h
""".split())

# Calls that do I/O, spawn, talk to the network, read clocks or hand the work to a library.
FORBIDDEN_CALLS = [
    r"system", r"popen", r"fork", r"vfork", r"clone", r"exec\w*", r"posix_spawn\w*",
    r"syscall", r"socket", r"connect", r"bind", r"listen", r"accept", r"dlopen", r"dlsym",
    r"pthread_\w+", r"thrd_create", r"fopen", r"freopen", r"open", r"openat", r"creat",
    r"mmap", r"mprotect", r"kill", r"raise", r"signal", r"sigaction", r"atexit",
    r"getenv", r"setenv", r"putenv", r"clock_gettime", r"gettimeofday", r"clock", r"time",
    r"times", r"nanosleep", r"usleep", r"sleep", r"setjmp", r"longjmp",
    r"cblas_\w+", r"mkl_\w+", r"openblas_\w+", r"LAPACKE_\w+", r"__builtin_ia32_rdtscp?",
]

_INCLUDE = re.compile(r"^\s*#\s*include\s*(.*)$", re.MULTILINE)
_ASM = re.compile(r"\b(asm|__asm__|__asm)\b")
_BAD_ATTRIBUTE = re.compile(
    r"__attribute__\s*\(\(.*?\b(constructor|destructor|ifunc|alias|weakref|section|"
    r"visibility|used|naked)\b", re.DOTALL)
_MAIN = re.compile(r"\bint\s+main\s*\(")


def check_source(code: str, extra_forbidden: tuple[str, ...] = ()) -> str | None:
    """None when the source obeys the library rules, else a one-line reason."""
    code = strip_comments(code)
    for m in _INCLUDE.finditer(code):
        target = m.group(1).strip()
        hm = re.match(r"^<([\w./]+)>", target)
        if not hm:
            return (f"#include {target} is not allowed: include only system headers in <> "
                    f"(e.g. <immintrin.h>, <omp.h>)")
        if hm.group(1) not in ALLOWED_HEADERS:
            return f"#include <{hm.group(1)}> is not allowed in a kernel"
    if m := _ASM.search(code):
        return f"inline assembly ('{m.group(1)}') is not allowed in a kernel"
    if m := _BAD_ATTRIBUTE.search(code):
        return f"__attribute__(({m.group(1)})) is not allowed in a kernel"
    if _MAIN.search(code):
        return "a kernel must not define main()"
    names = [re.escape(n) for n in extra_forbidden] + FORBIDDEN_CALLS
    call = re.compile(r"(?<![\w.>])(" + "|".join(names) + r")\s*\(")
    for m in call.finditer(_without_strings(code)):
        return f"calling {m.group(1)}() is not allowed in a kernel"
    return None


def _without_strings(code: str) -> str:
    return re.sub(r"\"(?:\\.|[^\"\\\n])*\"", '""', code)
