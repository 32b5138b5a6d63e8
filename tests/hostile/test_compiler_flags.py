"""The harness owns the compiler flags: a kernel may not change its own -O level or target ISA
(#pragma GCC optimize/target, the optimize/target/target_clones attributes, clang's attribute
push), whether written plainly, built by macros, expanded inside a system header, or hidden
behind a line directive that dresses the kernel's code up as a system header's.

The flags_*.c candidates also run in test_hostile.py (at the default -O level); here they run at
O0, where a lift to O3 pays most."""
import importlib
import subprocess
from pathlib import Path

import pytest

from perfgym import Status, evaluate
from perfgym.checks import check_source
from perfgym.checks.audit import CANDIDATE_FILE, audit_preprocessed

CANDIDATES = sorted((Path(__file__).parent / "candidates").glob("flags_*.c"))
SMALL = {"M": 64, "N": 64, "K": 64}
HARNESS_OWNS = "the harness sets the compiler flags"
# Caught by the audit of the preprocessed source only: the source shows no pragma or attribute.
MACRO_ONLY = {"flags_attribute_pasted", "flags_pragma_macro", "flags_pragma_pasted",
              "flags_pragma_injected_into_header", "flags_function_injected_into_header"}

HONEST = """\
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++)
            C[i * N + j] = 0.0;
        for (int k = 0; k < K; k++) {
            double a = A[i * K + k];
            for (int j = 0; j < N; j++)
                C[i * N + j] += a * B[k * N + j];
        }
    }
}
"""
LIFT = '#pragma GCC optimize("O3")\n'


@pytest.fixture
def o0(fast):
    return fast.replace(opt="O0")


def defuse(monkeypatch):
    """Switch off the source check and the preprocessed-source audit (the object audit stays)."""
    monkeypatch.setattr(importlib.import_module("perfgym.backends.c"), "check_source",
                        lambda *args, **kwargs: None)
    monkeypatch.setattr(importlib.import_module("perfgym.backends.c.build"), "audit_preprocessed",
                        lambda *args, **kwargs: None)


def preprocess(code: str, workdir: Path, config) -> str:
    """gcc -E -dI output of the code, as the build makes it (trusted test files only)."""
    (workdir / CANDIDATE_FILE).write_text(code)
    subprocess.run(["gcc", *config.build_flags(), "-E", "-dI", CANDIDATE_FILE, "-o", "out.i"],
                   cwd=workdir, check=True, capture_output=True)
    return (workdir / "out.i").read_text()


# ---- the measured case: O0 ----------------------------------------------------------------------


def test_honest_kernel_is_ok_at_O0(dgemm, o0):
    outcome = evaluate(dgemm, HONEST, None, o0)
    assert outcome.status is Status.OK, outcome.message
    assert outcome.config["opt"] == "O0"


def test_optimize_pragma_at_O0_is_a_library_violation(dgemm, o0):
    outcome = evaluate(dgemm, LIFT + HONEST, None, o0)
    assert outcome.status is Status.LIBRARY_VIOLATION
    assert "#pragma GCC optimize" in outcome.message and HARNESS_OWNS in outcome.message
    assert "\n" not in outcome.message


def test_the_lift_pays_when_the_checks_are_off(dgemm, o0, monkeypatch):
    """What the checks stop: the same kernel under the pragma runs many times the O0 rate."""
    defuse(monkeypatch)
    honest = evaluate(dgemm, HONEST, None, o0)
    lifted = evaluate(dgemm, LIFT + HONEST, None, o0)
    assert honest.status is Status.OK and lifted.status is Status.OK
    assert lifted.gflops > 3 * honest.gflops, (honest.gflops, lifted.gflops)


def test_the_audit_message_names_the_harness_flags(dgemm, o0):
    outcome = evaluate(dgemm, (CANDIDATES[0].parent / "flags_pragma_macro.c").read_text(), SMALL,
                       o0)
    assert outcome.status is Status.LIBRARY_VIOLATION
    assert f"{HARNESS_OWNS} (-O0 -march=native)" in outcome.message


@pytest.mark.parametrize("hints", [
    ("", "#pragma GCC unroll 8", ""),
    ("", "#pragma GCC ivdep", ""),
    ("#pragma omp parallel for", "", ""),
    ("#pragma omp parallel for", "#pragma omp simd", "#include <omp.h>"),
    ("", "#pragma clang loop vectorize(enable)", ""),
], ids=["unroll", "ivdep", "omp-parallel-for", "omp-simd", "clang-loop"])
def test_loop_hints_stay_allowed(dgemm, o0, hints):
    outer, inner, header = hints
    code = header + "\n" + HONEST.replace(
        "    for (int i = 0; i < M; i++)", f"{outer}\n    for (int i = 0; i < M; i++)").replace(
        "            for (int j = 0; j < N; j++)\n                C[i * N + j] +=",
        f"{inner}\n            for (int j = 0; j < N; j++)\n                C[i * N + j] +=")
    assert code.count("#pragma") == bool(outer) + bool(inner)
    outcome = evaluate(dgemm, code, None, o0)
    assert outcome.status is Status.OK, outcome.message


# ---- every form ---------------------------------------------------------------------------------


def test_every_form_has_a_candidate():
    assert len(CANDIDATES) >= 20


@pytest.mark.parametrize("path", CANDIDATES, ids=[p.stem for p in CANDIDATES])
def test_flag_lift_is_rejected_at_O0(path, dgemm, o0):
    outcome = evaluate(dgemm, path.read_text(), SMALL, o0)
    assert outcome.status is Status.LIBRARY_VIOLATION, f"{outcome.status}: {outcome.message}"
    assert any(s in outcome.message for s in (HARNESS_OWNS, "line directive", "raw string"))
    assert "\n" not in outcome.message


# target_clones makes an ifunc resolver, which the object audit rejects on its own
@pytest.mark.parametrize("path", [p for p in CANDIDATES if p.stem != "flags_target_clones"],
                         ids=[p.stem for p in CANDIDATES if p.stem != "flags_target_clones"])
def test_flag_candidate_is_otherwise_a_correct_kernel(path, dgemm, o0, monkeypatch):
    """Only the flag checks stand between each candidate and an OK score."""
    defuse(monkeypatch)
    outcome = evaluate(dgemm, path.read_text(), SMALL, o0)
    assert outcome.status is Status.OK, f"{outcome.status}: {outcome.message}"


@pytest.mark.parametrize("path", CANDIDATES, ids=[p.stem for p in CANDIDATES])
def test_source_check_names_the_plain_forms_early(path):
    reason = check_source(path.read_text())
    if path.stem in MACRO_ONLY:
        assert reason is None  # left to the audit of the preprocessed source
    else:
        assert reason and any(s in reason for s in (HARNESS_OWNS, "line directive", "raw string"))


@pytest.mark.parametrize("path", CANDIDATES, ids=[p.stem for p in CANDIDATES])
def test_preprocessed_audit_alone_rejects_every_candidate(path, tmp_path, o0):
    """The audit of the .i is the wall: it holds even where the source check would not."""
    reason = audit_preprocessed(preprocess(path.read_text(), tmp_path, o0), "gcc",
                                o0.build_flags())
    assert reason
    if "forged" in path.stem or "raw_string" in path.stem:  # these forge a line marker too
        assert "line directives are not allowed" in reason
    else:
        assert f"{HARNESS_OWNS} (-O0 -march=native)" in reason


def test_preprocessed_audit_passes_honest_kernels(dgemm, tmp_path, o0):
    """The headers' own target pragmas and attributes are not the kernel's."""
    every_header = "".join(f"#include <{h}>\n" for h in (
        "immintrin.h", "x86intrin.h", "omp.h", "stdlib.h", "stdio.h", "string.h", "math.h",
        "stdint.h", "stddef.h", "limits.h", "float.h", "malloc.h", "mm_malloc.h", "complex.h"))
    for code in (dgemm.baseline.read_text(), dgemm.expert.read_text(), every_header + HONEST,
                 "#define OPT O3\n" + HONEST.replace(" a", " optimize")):
        for config in (o0, o0.replace(opt="O3", march="x86-64-v3")):
            assert audit_preprocessed(preprocess(code, tmp_path, config), "gcc",
                                      config.build_flags()) is None


def test_the_audit_beside_the_compile_judges_the_file_as_the_compiler_left_it(tmp_path, o0):
    """The .i is audited while gcc compiles, started by the build's marker. A marker that came
    before the file was complete (or a forged one) must not let the audit pass a text other
    than the one compiled: the verdict is for the file as it is once the build is over."""
    from perfgym.backends.c.build import _PREPROCESSED, _PreprocessedAudit
    clean = preprocess(HONEST, tmp_path, o0)
    lifted = preprocess(LIFT + HONEST, tmp_path, o0)
    path = tmp_path / "candidate.i"
    for early, final in ((clean, lifted), ("", lifted), (lifted, clean)):
        path.write_text(early)
        audit = _PreprocessedAudit(path, "gcc", o0.build_flags())
        audit.on_marker(_PREPROCESSED)  # too early: the file changes after it
        audit.done.wait()
        path.write_text(final)
        audit.stop()
        expected = audit_preprocessed(final, "gcc", o0.build_flags())
        assert audit.verdict() == expected
        assert (expected is None) == (final is clean)
    # no marker at all (gcc -E failed, or the line never came): the file is audited at the end
    path.write_text(lifted)
    audit = _PreprocessedAudit(path, "gcc", o0.build_flags())
    audit.on_marker("@something else")
    audit.stop()
    assert HARNESS_OWNS in audit.verdict()


# ---- the source check's reading of directives ---------------------------------------------------

SYSTEM = "/usr/include/stdlib.h"


@pytest.mark.parametrize("code", [
    '#line 5 "x.h"\n', f'# 1 "{SYSTEM}" 1 3 4\n', '%:line 5 "x.h"\n', '%: 7 "x.h" 1 3\n',
    '#\\\nline 5 "x.h"\n', '#\\ \nline 5 "x.h"\n',  # gcc splices a backslash, blanks, newline
    '# /* c */ line 5 "x.h"\n', '#/*\n*/ 5 "x.h"\n', 'int a;\n/*\n*/ # 5 "x.h"\n',
    '/* a */ /* b */ #line 5 "x.h"\n', '\f\v # 5 "x.h"\n', '\0# 5 "x.h"\n',
    'int a;\r#line 5 "x.h"\r', '#\\\r\nline 5 "x.h"\r\n',
    # a lone quote or a header name makes gcc read past a "/*" that a comment stripper obeys
    f"#if 0\n'a /*\n#endif\n# 1 \"{SYSTEM}\" 1 3 4\n// */\n",
    f'#if __has_include(<x/*>)\n#endif\n/* a */ # 1 "{SYSTEM}" 1 3 4\n// */\n',
], ids=["line", "gnu", "digraph", "digraph-gnu", "splice", "splice-blank", "comment-between",
        "comment-across-lines", "comment-tail-before", "comments-before", "ff-vt", "nul", "cr",
        "crlf-splice", "lone-quote", "has-include"])
def test_line_directives_are_found_however_spelled(code):
    assert "line directives" in check_source(code + HONEST)


@pytest.mark.parametrize("code, fragment", [
    ('#pragma GCC optimize("O3")\n', "#pragma GCC optimize"),
    ('  #  pragma   GCC  optimize ("O3")\n', "#pragma GCC optimize"),
    ('%:pragma GCC optimize("O3")\n', "#pragma GCC optimize"),
    ('#pragma GCC \\\n optimize("O3")\n', "#pragma GCC optimize"),
    ('_Pragma("GCC optimize(\\"O3\\")")\n', "#pragma GCC optimize"),
    ('#pragma GCC target("avx2")\n', "#pragma GCC target"),
    ("#pragma GCC reset_options\n", "#pragma GCC reset_options"),
    ("#pragma clang optimize off\n", "#pragma clang optimize"),
    ('__attribute__((noinline, target_clones("avx2", "default")))\n', "target_clones attribute"),
    ('__attribute__((aligned(64), __target__("avx")))\n', "target attribute"),
    ('[[using gnu: optimize("O3")]]\n', "optimize attribute"),
])
def test_flag_constructs_are_named(code, fragment):
    reason = check_source(code + HONEST)
    assert fragment in reason and HARNESS_OWNS in reason


@pytest.mark.parametrize("code", [
    "// step #1: pack B\n/* #2 */ int x = 1; /* a */ // #3\n",
    "/*\n * #1 block\n */\n",
    "#\n",  # the null directive
    "#/* c */define NB 64\n#if 1\n#endif\n#define STR(x) #x\n#define CAT(a, b) a##b\n",
    'static const char *s = "#pragma GCC optimize";\n',
    "static int target(int optimize) { return optimize; }\n",
    "__attribute__((aligned(64))) static double buf[8];\n"
    "static inline __attribute__((always_inline)) int g(int target) { return target; }\n",
    "#pragma GCC unroll 4\n#pragma GCC ivdep\n#pragma omp simd\n#pragma clang loop unroll(full)\n",
])
def test_honest_code_passes(code):
    assert check_source(code + HONEST) is None


# ---- the fast readings against plain ones -----------------------------------------------------

def _every_bracket_oracle(code: str):
    """flag_attributes as first written: every bracket of the file on two stacks (slow on a
    60,000-line header dump, plain to check). The real one reads only where a list is open."""
    import re

    from perfgym.checks import source
    code = source._LITERAL.sub(lambda m: " " * len(m.group()), code)
    code = code.replace("<:", "[ ").replace(":>", " ]")
    lists = {m.end() - 1 for m in re.finditer(r"\b__attribute(?:__)?\s*\(\s*\(|\[\s*\[", code)}
    rounds, squares = [], []
    for m in source._BRACKET_OR_FLAG_NAME.finditer(code):
        token = m.group()
        if token in "([":
            (rounds if token == "(" else squares).append(m.start())
        elif token in ")]":
            if stack := rounds if token == ")" else squares:
                stack.pop()
        elif ((rounds[-1] if rounds else -1) in lists
              or ((squares[-1] if squares else -1) in lists
                  and (rounds[-1] if rounds else -1) < squares[-1])):
            yield m.start(), token


def test_fast_readings_agree_with_plain_ones_on_random_text():
    """The audit of the .i reads 60,000 lines per intrinsics header: its readings are made
    fast (literal-first searches; brackets read only where an attribute list is open). On
    random soups of the tokens that matter they agree with the plain readings exactly."""
    import random
    import re

    from perfgym.checks import audit, source
    atoms = ["(", ")", "[", "]", "[[", "]]", "((", "))", "__attribute__((", "__attribute((",
             "__attribute__ ((", "x__attribute__((", "target", "__target__", "optimize",
             "_optimize_", "target_clones", "xtarget", "target_version", "gnu::", " ", "\n", ",",
             '"', "'", '"a(b"', "'('", "<:", ":>", "R\"(", "uR\"x(", "u8R\"(", "LR\"", "aR\"(",
             "_R\"(", "__builtin_setjmp", "x__builtin_setjmp", "__builtin_return_address",
             "___builtin_frame_address", "__builtin_return_addressx"]
    frame = re.compile(r"\b" + audit._FRAME_BUILTINS.pattern)
    rnd, found = random.Random(5), 0
    for _ in range(20000):
        code = "".join(rnd.choice(atoms) for _ in range(rnd.randint(1, 25)))
        expected = list(_every_bracket_oracle(code))
        assert list(source.flag_attributes(code)) == expected, code
        assert source.has_raw_string(code) == bool(source.RAW_STRING.search(code)), code
        plain = frame.search(code)
        fast = source.search_word_start(audit._FRAME_BUILTINS, code)
        assert (plain and plain.group(1)) == (fast and fast.group(1)), code
        found += bool(expected)
    assert found > 500  # the soups do hold attributes
