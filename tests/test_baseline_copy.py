"""The naive kernel in disguise is the naive kernel (evaluate.is_baseline_copy): a copy is
paid as the naive kernel by the speed reward, whatever noise its timing carried. Disguises
an answer can wear, and real changes that must not be mistaken for a copy."""
import pytest

from perfgym import get_task
from perfgym.backends import backend_for
from perfgym.evaluate import is_baseline_copy
from perfgym.extract import code_shape
from perfgym.opening import answer_start


def naive(name: str) -> str:
    return get_task(name).baseline.read_text()


DISGUISES = {
    "comments and blank lines": lambda k: "/* mine */\n" + k.replace("\n", "\n\n// x\n"),
    "perfgym's own #include lines (an opened answer)": lambda k: "#include <stddef.h>\n"
                                                                 "#include <omp.h>\n" + k,
    "one line": lambda k: " ".join(k.split("\n")),
    "spaces around every operator": lambda k: k.replace("+=", " += ").replace("] * ", "]*")
                                              .replace("= 0.0", " =  0.0"),
    "renamed variables": lambda k: k.replace("sum", "acc").replace("int i", "int ii")
                                    .replace("[i]", "[ii]").replace("i++", "ii++")
                                    .replace("i <", "ii <"),
}


@pytest.mark.parametrize("disguise", DISGUISES)
def test_a_disguised_naive_kernel_is_a_copy(disguise):
    task = get_task("dot")
    disguised = DISGUISES[disguise](naive("dot"))
    assert disguised != naive("dot")
    assert is_baseline_copy(task, disguised), disguised


def test_the_opened_answer_of_the_naive_body_is_a_copy():
    for name in ("dot", "dgemm", "jacobi2d"):
        task = get_task(name)
        opening = answer_start(task)
        body = naive(name).split("{", 1)[1]  # what the model writes after perfgym's opening
        kernel = backend_for(task).extract(task, opening + body + "\n```")
        assert "#include" in kernel and is_baseline_copy(task, kernel), name


@pytest.mark.parametrize("change", [
    lambda k: k.replace("for (int i", "#pragma omp simd reduction(+:sum)\n    for (int i"),
    lambda k: k.replace("for (int i", "#pragma omp parallel for reduction(+:sum)\n"
                                      "    for (int i"),
    lambda k: k.replace("sum += x[i] * y[i];", "sum += x[i] * y[i] * 1.0000001;"),
    lambda k: k.replace("i++", "i += 1") + "\n",
    lambda k: k.replace("double sum", "float sum"),
])
def test_a_real_change_is_no_copy(change):
    changed = change(naive("dot"))
    assert changed != naive("dot")
    assert not is_baseline_copy(get_task("dot"), changed)


def test_pragmas_are_kept_as_written():
    # `omp simd` and `omp parallel` at one place are two kernels, not one renamed
    a = "#pragma omp simd\nfor (int i = 0; i < n; i++) x[i] = 0;"
    b = "#pragma omp parallel for\nfor (int i = 0; i < n; i++) x[i] = 0;"
    assert code_shape(a) != code_shape(b)
    # names are renamed consistently: swapping two names' roles is a change
    assert code_shape("a[i] = b[i];") == code_shape("p[k] = q[k];")
    assert code_shape("a[i] = b[i];") != code_shape("a[i] = a[i];")


# The base model's answer to dot in the learning-speed run's pilot (2026-11-29): the naive loop
# with braces around its body. Not caught as a copy, its timing noise read 1.126x, and it
# counted as faster, five times over.
BRACED_DOT = """#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <omp.h>

void dot_optimized(double *x, double *y, double *out, int N) {
    double sum = 0.0;
    for (int i = 0; i < N; i++) {
        sum += x[i] * y[i];
    }
    out[0] = sum;
}"""

BRACED_DGEMM = """void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double sum = 0.0;
            for (int k = 0; k < K; k++) { sum += A[i * K + k] * B[k * N + j]; }
            C[i * N + j] = sum;
        }
    }
}"""

BRACED_TRANSPOSE = """void transpose_optimized(double *A, double *B, int N, int M) {
    for (int i = 0; i < N; i++) { for (int j = 0; j < M; j++) {
        B[(long)j * N + i] = A[(long)i * M + j];
    } }
}"""

BRACED_JACOBI = naive("jacobi2d").replace(
    "for (int i = 1; i < N - 1; i++)\n", "for (int i = 1; i < N - 1; i++) {\n").replace(
    "out[i * M + j + 1]);\n", "out[i * M + j + 1]);\n        }\n").replace(
    "out[i * M + j] = tmp[i * M + j];\n", "out[i * M + j] = tmp[i * M + j];\n        }\n")


@pytest.mark.parametrize("name, code", [("dot", BRACED_DOT), ("dgemm", BRACED_DGEMM),
                                        ("transpose", BRACED_TRANSPOSE),
                                        ("jacobi2d", BRACED_JACOBI)])
def test_braces_around_a_one_statement_body_are_no_change(name, code):
    assert code.count("{") > naive(name).count("{")
    assert is_baseline_copy(get_task(name), code), code


@pytest.mark.parametrize("a, b", [
    # a second statement outside the loop is not a second statement inside it
    ("for (int i = 0; i < n; i++) { x[i] = 0; y[i] = 1; }",
     "for (int i = 0; i < n; i++) x[i] = 0; y[i] = 1;"),
    # the braces decide which if the else belongs to
    ("if (a) { if (b) x[0] = 1; } else x[0] = 2;",
     "if (a) if (b) x[0] = 1; else x[0] = 2;"),
    # a function's body and an initializer keep theirs
    ("void f(int *x) { x[0] = 0; }", "void f(int *x) x[0] = 0;"),
    ("double a[2] = {0, 1};", "double a[2] = 0, 1;"),
])
def test_braces_that_change_the_program_are_kept(a, b):
    assert code_shape(a) != code_shape(b)


def test_a_braced_real_change_is_no_copy():
    # two accumulators, braced: a real change stays one whatever its braces
    two = BRACED_DOT.replace("double sum = 0.0;", "double sum = 0.0, s2 = 0.0;").replace(
        "for (int i = 0; i < N; i++) {\n        sum += x[i] * y[i];\n    }",
        "int i = 0;\n    for (; i + 1 < N; i += 2) {\n        sum += x[i] * y[i];\n"
        "        s2 += x[i + 1] * y[i + 1];\n    }\n    for (; i < N; i++) { sum += x[i] * y[i]; }"
    ).replace("out[0] = sum;", "out[0] = sum + s2;")
    assert "s2" in two and not is_baseline_copy(get_task("dot"), two)
