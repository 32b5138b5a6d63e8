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
    with pytest.raises(FormatError):
        extract_code("```c\n" + DEF, dgemm.signature)


def test_qualifiers_are_accepted(dgemm):
    code = DEF.replace("double *A", "const double *restrict A").replace("double *B",
                                                                        "double* __restrict__ B")
    assert defines_entry(code, dgemm.signature)


def test_comments_do_not_define(dgemm):
    assert not defines_entry("/* " + DEF + " */", dgemm.signature)
    assert strip_comments('a // x\nb /* y */ "/* kept */"') == 'a \nb   "/* kept */"'


def test_normalize_ignores_comments_and_whitespace():
    assert normalize("int  a;  // hi\n\n\n/* c */ int b;") == normalize("int a;\n int b;")
