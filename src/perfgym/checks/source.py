"""Source-level library rules: which headers, calls and constructs a kernel may use.

These give a clear message early; the object audit and the audit of the preprocessed source
(audit.py) are the wall that macros and obfuscation cannot get around.
"""
from __future__ import annotations

import re
from typing import Iterator

from ..extract import strip_comments

ALLOWED_HEADERS = frozenset("""
stdlib.h stdio.h string.h math.h stdint.h stddef.h stdbool.h float.h limits.h assert.h
inttypes.h complex.h stdalign.h malloc.h mm_malloc.h omp.h
immintrin.h x86intrin.h xmmintrin.h emmintrin.h pmmintrin.h tmmintrin.h smmintrin.h
nmmintrin.h wmmintrin.h avxintrin.h avx2intrin.h avx512fintrin.h fmaintrin.h
arm_neon.h arm_sve.h
""".split())

# C++ kernels: the C list plus the standard headers of containers, algorithms and numerics.
# Not <thread>, <chrono>, <fstream>, <iostream>, <future>, <mutex>, <atomic>, <random>,
# <filesystem>: threads, clocks and I/O (the object audit refuses their calls as well).
CPP_HEADERS = ALLOWED_HEADERS | frozenset("""
cmath cstdlib cstring cstdint cstddef climits cfloat cassert cinttypes complex vector array
algorithm numeric utility type_traits limits functional initializer_list iterator tuple
valarray bitset memory new deque queue stack
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

# Every rule here reads a candidate's answer, so each runs in time linear in its length: no
# pattern may rescan the text from many starting points (`^\s*` would run on across every blank
# line that follows each line start, `\(\(.*?word` to the end of the file from each opener).
_INCLUDE = re.compile(r"^[^\S\n]*#\s*include\s*(.*)$", re.MULTILINE)
_ASM = re.compile(r"\b(asm|__asm__|__asm)\b")
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\(")
_BAD_ATTRIBUTE_NAME = re.compile(r"\b(constructor|destructor|ifunc|alias|weakref|section|"
                                 r"visibility|used|naked)\b")
_MAIN = re.compile(r"\bint\s+main\s*\(")

# Pragmas and attributes that change the compiler flags (-O level, target ISA) for part of a file:
# the harness owns the flags, so a kernel built at --opt O0 must not lift itself to O3.
# Loop hints (#pragma GCC unroll/ivdep, #pragma omp, #pragma clang loop) stay allowed.
_FLAG_PRAGMA_NAMES = (r"(GCC\s+(?:optimize|target|push_options|pop_options|reset_options)"
                      r"|clang\s+(?:attribute|optimize|fp)|float_control)\b")
FLAG_PRAGMA = re.compile(r"^[^\S\n]*(?:#|%:)[^\S\n]*pragma[^\S\n]+" + _FLAG_PRAGMA_NAMES, re.M)
_FLAG_PRAGMA_OPERATOR = re.compile(r"\b_Pragma\s*\(\s*(?:u8|u|U|L)?\"\s*" + _FLAG_PRAGMA_NAMES)
FLAG_ATTRIBUTES = frozenset({"optimize", "target", "target_clones", "target_version"})
# The two forms of an attribute list's opening, GNU and C23. Each is searched from its literal
# first characters (Python's re skips ahead to those; a leading \b or lookbehind makes it try
# every position, 10x slower on the 60,000 lines an intrinsics header preprocesses to).
_GNU_ATTRIBUTE_OPEN = re.compile(r"__attribute(?:__)?\s*\(\s*\(")
_C23_ATTRIBUTE_OPEN = re.compile(r"\[\s*\[")
_WORD = re.compile(r"\w")
_BRACKET_OR_FLAG_NAME = re.compile(
    r"[()\[\]]|(?<!\w)_*(?:" + "|".join(sorted(FLAG_ATTRIBUTES, key=len, reverse=True)) + r")_*(?!\w)")
# (an unterminated literal runs to the end of its line, as gcc reads it)
_STRING = r"\"(?:\\.|[^\"\\\n])*+\\?(?:\"|(?=\n)|\Z)"
_LITERAL = re.compile(_STRING + r"|'(?:\\.|[^'\\\n])*+\\?(?:'|(?=\n)|\Z)")

# Line directives (#line N "file", GNU "# N file flags") would let a kernel present its own code
# as a system header's. They are looked for in the raw text, comments kept: a comment stripper
# can be led astray (an unterminated quote, __has_include(<a/*>)), so trust no comment boundary:
# a line may begin with the tail of a comment, comments may sit around the '#', one may run on.
_SPLICE = re.compile(r"\\[ \t\f\v\0]*\n")  # gcc also splices a backslash followed by blanks
_COMMENT = r"/\*(?:[^*\n]|\*(?!/))*\*/"
_LINE_DIRECTIVE = re.compile(
    rf"^(?:(?:[^*\n]|\*(?!/))*\*/)?(?:[ \t\f\v\0\ufeff]|{_COMMENT})*(?:#|%:|\?\?=)"
    rf"(?:[ \t\f\v\0]|{_COMMENT})*(?:line\b|\d|/\*(?!.*\*/))", re.M)
# Raw strings may span lines, so they can hide a directive from a comment stripper and fake a
# line marker in the preprocessed source; a kernel has no use for them.
RAW_STRING = re.compile(r"(?<!\w)(?:u8|u|U|L)?R\"[^\s()\\]{0,16}\(")
_RAW_STRING_BODY = re.compile(r"R\"[^\s()\\]{0,16}\(")  # its literal part, found first


def search_word_start(pattern: re.Pattern, text: str, pos: int = 0) -> re.Match | None:
    """pattern.search(text) for a match that no word character precedes (what a leading \\b
    before a word, or (?<!\\w), asks), with `pattern` starting on its literal part: found
    by the fast literal search, then the character before it checked."""
    while m := pattern.search(text, pos):
        if m.start() == 0 or not _WORD.match(text, m.start() - 1):
            return m
        pos = m.start() + 1
    return None


def has_raw_string(text: str) -> bool:
    """RAW_STRING.search(text) is not None, with the literal R"...( found first."""
    pos = 0
    while m := _RAW_STRING_BODY.search(text, pos):
        # the optional prefix (u8, u, U, L) starts up to two characters before the R
        if any(RAW_STRING.match(text, at) for at in range(max(0, m.start() - 2), m.start() + 1)):
            return True
        pos = m.start() + 1
    return False


def check_source(code: str, extra_forbidden: tuple[str, ...] = (),
                 headers: frozenset[str] = ALLOWED_HEADERS) -> str | None:
    """None when the source obeys the library rules, else a one-line reason."""
    joined = _SPLICE.sub("", code.replace("\r\n", "\n").replace("\r", "\n"))
    logical = strip_comments(joined)
    if has_raw_string(logical):
        return 'raw string literals (R"(...)") are not allowed in a kernel'
    if _LINE_DIRECTIVE.search(joined):
        return ("line directives (#line, # N \"file\") are not allowed in a kernel: they would "
                "disguise its code as a system header's")
    if construct := flag_override(logical):
        return flags_reason(construct)
    code = logical  # spliced and comment-free, as the preprocessor reads it
    for m in _INCLUDE.finditer(code):
        target = m.group(1).strip()
        hm = re.match(r"^<([\w./]+)>", target)
        if not hm:
            return (f"#include {target} is not allowed: include only system headers in <> "
                    f"(e.g. <immintrin.h>, <omp.h>)")
        if hm.group(1) not in headers:
            return f"#include <{hm.group(1)}> is not allowed in a kernel"
    if m := _ASM.search(code):
        return f"inline assembly ('{m.group(1)}') is not allowed in a kernel"
    # (any such word after the first attribute, as the rule has always read)
    if (first := _ATTRIBUTE.search(code)) and (m := _BAD_ATTRIBUTE_NAME.search(code, first.end())):
        return f"__attribute__(({m.group(1)})) is not allowed in a kernel"
    if _MAIN.search(code):
        return "a kernel must not define main()"
    names = [re.escape(n) for n in extra_forbidden] + FORBIDDEN_CALLS
    call = re.compile(r"(?<![\w.>])(" + "|".join(names) + r")\s*\(")
    for m in call.finditer(_without_strings(code)):
        return f"calling {m.group(1)}() is not allowed in a kernel"
    return None


def _without_strings(code: str) -> str:
    return re.sub(_STRING, '""', code)


def flag_override(code: str) -> str | None:
    """The first pragma or attribute in comment-free C that sets compiler flags, named for a
    message, else None. Macros are not expanded here; audit.py reads the preprocessed source."""
    if m := FLAG_PRAGMA.search(code) or _FLAG_PRAGMA_OPERATOR.search(code):
        return "#pragma " + " ".join(m.group(1).split())
    for _, name in flag_attributes(code):
        return f"the {name.strip('_')} attribute"
    return None


def flag_attributes(code: str) -> Iterator[tuple[int, str]]:
    """(offset in code, name as spelled) of each attribute in comment-free C that sets
    compiler flags: __attribute__((optimize("O3"))), [[gnu::target("avx2")]], __optimize__..."""
    blank = lambda m: " " * len(m.group())  # noqa: E731  (offsets must not move)
    code = _LITERAL.sub(blank, code).replace("<:", "[ ").replace(":>", " ]")  # <:<: is [[
    # each attribute list's bracket (the GNU form's \b checked by search_word_start)
    lists = {m.end() - 1 for m in _C23_ATTRIBUTE_OPEN.finditer(code)}
    pos = 0
    while m := search_word_start(_GNU_ATTRIBUTE_OPEN, code, pos):
        lists.add(m.end() - 1)
        pos = m.end()
    # The brackets (each kind matched on its own, as the compiler's reader does) and the names:
    # a name belongs to an attribute list, not to an argument inside it, when the innermost open
    # bracket around it is the list's own ('(' of __attribute__((...)), or '[' of [[...]] with
    # no '(' opened inside it). Only the stretches where a list is open are read, each from its
    # first list's bracket until no list is open: a bracket opened before a stretch is never a
    # list's, so it decides nothing inside (an unmatched closer there pops nothing here, where
    # reading from the file's start would pop a bracket that makes no difference either).
    end = 0
    for start in sorted(lists):
        if start < end:  # read with the stretch before
            continue
        rounds: list[int] = []
        squares: list[int] = []
        open_lists = 0
        end = len(code)
        for m in _BRACKET_OR_FLAG_NAME.finditer(code, start):
            token = m.group()
            if token in "([":
                (rounds if token == "(" else squares).append(m.start())
                open_lists += m.start() in lists
            elif token in ")]":
                if stack := rounds if token == ")" else squares:
                    open_lists -= stack.pop() in lists
                if not open_lists:
                    end = m.end()
                    break
            else:
                round_ = rounds[-1] if rounds else -1
                square = squares[-1] if squares else -1
                if round_ in lists or (square in lists and round_ < square):
                    yield m.start(), token


def flags_reason(construct: str, flags: str = "") -> str:
    return (f"{construct} is not allowed: the harness sets the compiler flags"
            f"{f' ({flags})' if flags else ''}; write the optimization in the code")

