import pytest

from perfgym.extract import FormatError, defines_entry, extract_code, normalize, strip_comments

NAIVE_BODY = "{ C[0] = A[0] * B[0]; }"
DEF = "void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) " + NAIVE_BODY


def test_plain_c(dgemm):
    assert extract_code(DEF, dgemm.signature) == DEF


def test_last_defining_block_wins(dgemm):
    answer = ("Here is a draft:\n```c\n" + DEF.replace("A[0]", "A[1]") + "\n```\nand the final"
              " version:\n```c\n" + DEF + "\n```\n```bash\ngcc x.c\n```\n")
    assert extract_code(answer, dgemm.signature).strip() == DEF


def test_format_errors(dgemm):
    with pytest.raises(FormatError):
        extract_code("I cannot help with that.", dgemm.signature)
    with pytest.raises(FormatError):
        extract_code("```c\nvoid matmul(double *A) {}\n```", dgemm.signature)
    with pytest.raises(FormatError):  # wrong parameter type
        extract_code(DEF.replace("int K", "long K"), dgemm.signature)
    with pytest.raises(FormatError):  # declaration only
        extract_code(DEF.replace(NAIVE_BODY, ";"), dgemm.signature)


# Near-misses a reviewer would accept (seen from SmolLM2-135M): credited, then compiled,
# verified and timed like any answer.

def test_unclosed_last_block_is_taken(dgemm):
    assert extract_code("```c\n" + DEF, dgemm.signature).strip() == DEF
    # the answer ran out of tokens after a complete function
    assert extract_code("Sure!\n```C\n" + DEF + "\n// more to say", dgemm.signature).startswith(DEF)
    # a closed draft, then a final version whose fence never closed: the final one wins
    draft = DEF.replace("A[0]", "A[1]")
    assert extract_code(f"```c\n{draft}\n```\nbetter:\n```c\n{DEF}\n", dgemm.signature
                        ).strip() == DEF


def test_unclosed_block_must_still_define_the_entry(dgemm):
    with pytest.raises(FormatError):
        extract_code("```c\n#include <arm_neon.h> <arm_sve.h> #include <arm_neon.h>",
                     dgemm.signature)
    with pytest.raises(FormatError):  # a closed non-C block, then an unclosed one cut mid-body
        extract_code("```bash\ngcc\n```\n```c\nvoid matmul_optimized(double *A, double",
                     dgemm.signature)


def test_the_entrys_parameters_under_another_name_are_renamed(dgemm):
    other = DEF.replace("matmul_optimized", "matmul")
    code = extract_code(f"```c\n{other}\n```", dgemm.signature)
    assert defines_entry(code, dgemm.signature) and "matmul(" not in code
    recursive = ("void mm(double *A, double *B, double *C, int M, int N, int K) "
                 "{ if (M > 1) mm(A, B, C, M - 1, N, K); C[0] = 1; }")
    assert extract_code(recursive, dgemm.signature).count("matmul_optimized(") == 2


def test_renaming_needs_exactly_one_matching_public_function(dgemm):
    sig = dgemm.signature
    params = "(double *A, double *B, double *C, int M, int N, int K) { C[0] = 0; }"
    for answer in (f"void a{params}\nvoid b{params}",  # two candidates: which one?
                   f"static void a{params}",  # a helper, not an entry
                   f"int a{params}",  # another return type
                   "void a(double *A, double *B, double *C, int M, int N) { C[0] = 0; }",
                   # the entry's name is taken (declared) by something else
                   f"void matmul_optimized(int x);\nvoid a{params}"):
        with pytest.raises(FormatError):
            extract_code(f"```c\n{answer}\n```", sig)


def test_qualifiers_are_accepted(dgemm):
    code = DEF.replace("double *A", "const double *restrict A").replace("double *B",
                                                                        "double* __restrict__ B")
    assert defines_entry(code, dgemm.signature)


def test_comments_do_not_define(dgemm):
    assert not defines_entry("/* " + DEF + " */", dgemm.signature)
    assert strip_comments('a // x\nb /* y */ "/* kept */"') == 'a \nb   "/* kept */"'


def test_normalize_ignores_comments_and_whitespace():
    assert normalize("int  a;  // hi\n\n\n/* c */ int b;") == normalize("int a;\n int b;")
