"""Every text rule over a candidate's answer runs in time linear in its length.

Each worst case below is sent at the service's body limit (4 MiB) through everything that reads
an answer's text before the compiler does: extraction, the cache key, the library rules, the
stage detectors, the reading of the preprocessed source, the Python rules. Before these rules
were rewritten, several took hours at this size (the scalar-accumulate detector was cubic: 55k
characters of `a += b * c ` took 337 s; `^\\s*#include` was quadratic in blank lines), so the
bound below is generous for a busy machine and still far from what they took.
"""
import multiprocessing
import time

import pytest

from perfgym import get_task
from perfgym.backends.torch.protocol import extract_python
from perfgym.checks.audit import audit_preprocessed
from perfgym.backends.torch.python_rules import audit_python
from perfgym.checks.source import CPP_HEADERS, check_source
from perfgym.checks.stages import detect_techniques
from perfgym.extract import FormatError, extract_code, normalize

LIMIT = 4 << 20  # serve.py's default max_body
BOUND = 60.0  # seconds for one answer through every rule (about 2-6 s measured on 2 busy cores)


def fill(prefix: str, unit: str, suffix: str = "") -> str:
    return prefix + unit * ((LIMIT - len(prefix) - len(suffix)) // len(unit)) + suffix


# (name, text): what made a pattern search on from many starting points, or backtrack
WORST = [
    ("scalar accumulate", fill("", "a += b * c ")),
    ("blank lines before #include", fill("", "\n", "#include <x.h>\n")),
    ("blanks", fill("x", " ")),
    ("omp pragma then blanks", fill("#pragma omp", " ")),
    ("prefetch pragma then blanks", fill("#pragma", " ")),
    ("SVE name", fill("sv", "_f8")),
    ("open for loops", fill("", "for(i=")),
    ("step loops, each its own variable", "".join(
        f"for(v{i}=0;v{i}<n;v{i}+=b)" for i in range(LIMIT // 40))),
    ("attribute openers", fill("", "__attribute__((")),
    ("nested attributes", fill("", "__attribute__((x(")),
    ("C23 attribute openers", fill("", "[[")),
    ("parentheses", fill("", "(")),
    ("unterminated comments", fill("", "/*")),
    ("quotes", fill("", '"')),
    ("escaped quotes", fill("", '"\\')),
    ("fences on one line", fill("", "``` ", "\n")),
    ("empty fenced blocks", fill("", "```\n")),
    ("fenced blocks with a brace", fill("", "```\n{\n```\n")),
    ("return type then blanks", fill("int f", " ")),
    ("line splices", fill("", "\\\n")),
    ("line directive look-alikes", fill("", "/* */ #")),
    ("raw string openers", fill("", 'R"x(')),
    ("launch bounds", fill('class ModelNew: pass\ns = """', "__global__ __launch_bounds__(",
                           '"""\nload_inline(s)\n')),
    ("deep Python", fill("class ModelNew: pass\nx = ", "-", "1\n")),
]


def read_everything(text: str) -> None:
    """Every text rule an answer meets, in the order the backends apply them."""
    try:
        code = extract_code(text, get_task("dgemm").signature)
    except FormatError:
        code = text
    normalize(code)
    check_source(text, headers=CPP_HEADERS)
    detect_techniques(text)
    audit_preprocessed(text)  # as if gcc -E had passed it through
    try:
        audit_python(extract_python(text))
    except ValueError:  # no ModelNew block: the whole text then
        audit_python(text)


def _timed(text: str, answer) -> None:
    started = time.perf_counter()
    try:
        read_everything(text)
    except BaseException as exc:
        answer.send(f"{type(exc).__name__}: {exc}")
    answer.send(time.perf_counter() - started)


@pytest.mark.parametrize("name, text", WORST, ids=[n for n, _ in WORST])
def test_worst_case_at_the_body_limit(name, text):
    assert len(text.encode()) <= LIMIT
    get_task("dgemm"), audit_preprocessed("")  # warm up outside the timed child
    ours, theirs = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_timed, args=(text, theirs))
    child.start()
    try:
        assert ours.poll(BOUND), f"{name}: the rules took over {BOUND:g} s on {LIMIT} bytes"
        elapsed = ours.recv()
    finally:
        child.kill()
        child.join()
    assert isinstance(elapsed, float), f"{name}: {elapsed}"
    assert elapsed < BOUND


def test_the_rules_still_read_what_they_should():
    """The linear rewrites find what the old patterns found."""
    found = detect_techniques("""
        void f(double *a, int n) {
            for (int ii = 0; ii < n; ii += 64)
                for (int i = ii; i < ii + 64; i++) { s0 += a[i] * 2; s1 += a[i] * 3;
                    s2 += a[i] * a[i]; s3 += a[i] * 4; }
            #pragma omp parallel for simd
            for (int i = 0; i < n; i++) __builtin_prefetch(a + i);
            svfloat64_t v = svld1_f64(pg, a);
        }""")
    assert set(found) == {"cache_blocking", "register_blocking", "simd", "openmp", "prefetch"}
    assert found["register_blocking"] == "4 scalar accumulators"
    assert "steps of 64" in found["cache_blocking"]
    assert detect_techniques("#pragma   GCC   prefetch\n")["prefetch"]
    assert "not allowed" in check_source("\n\n\n   #include <unistd.h>\n")
    assert "constructor" in check_source("__attribute__((aligned(8))) int x;\n"
                                         "__attribute__((constructor)) void g(void) {}")
    assert "optimize" in check_source('[[gnu::optimize("O3")]] void f(void) {}')
    assert "optimize" in check_source('__attribute__((hot, optimize("O3"))) void f(void) {}')
    assert check_source('__attribute__((aligned(sizeof(int)))) int optimize;') is None
    with pytest.raises(FormatError, match="more than 100 code blocks"):  # a bound, and says so
        extract_code("```c\n{\n```\n" * 101, get_task("dgemm").signature)
    deep = audit_python("class ModelNew: pass\nx = " + "-" * 100_000 + "1\n")
    assert "nests too deeply" in deep.violation  # a verdict, not a RecursionError/MemoryError
    # an unterminated literal runs to the end of its line, as gcc reads it
    assert "system" in check_source("char c = 'a /*\nint g(void) { return system(\"x\"); }\n*/")
