import pytest

from perfgym.checks import check_source, detect_techniques, stage_violations
from perfgym.checks.stages import STAGES

SIMD = "#include <immintrin.h>\nvoid f(double *a) { __m256d x = _mm256_loadu_pd(a); }"
OMP = "void f(double *a, int n) {\n#pragma omp parallel for\nfor (int i = 0; i < n; i++) a[i] = 0; }"
OMP_SIMD = "void f(double *a, int n) {\n#pragma omp simd\nfor (int i = 0; i < n; i++) a[i] = 0; }"
NEON = "#include <arm_neon.h>\nvoid f(double *a) { float64x2_t v = vld1q_f64(a); }"
AVX512 = "void f(double *a) { __m512d v = _mm512_loadu_pd(a); }"
PREFETCH = "void f(double *a) { __builtin_prefetch(a + 64); }"
TILED = """void f(double *a, int n) {
  for (int ii = 0; ii < n; ii += 64)
    for (int i = ii; i < (ii + 64 < n ? ii + 64 : n); i++) a[i] = 0; }"""
REGISTER = """void f(double *a, double *b, double *c, int n) {
  for (int k = 0; k < n; k += 4) { c0 += a[k] * b[k]; c1 += a[k+1] * b[k+1]; } }"""


@pytest.mark.parametrize("code, technique", [
    (SIMD, "simd"), (OMP, "openmp"), (OMP_SIMD, "simd"), (NEON, "simd"), (AVX512, "simd"),
    (PREFETCH, "prefetch"), (TILED, "cache_blocking"), (REGISTER, "register_blocking")])
def test_detectors(code, technique):
    assert technique in detect_techniques(code)


def test_omp_simd_is_simd_not_openmp():
    assert "openmp" not in detect_techniques(OMP_SIMD)


def test_naive_has_no_techniques(dgemm):
    assert detect_techniques(dgemm.baseline.read_text()) == {}


def test_commented_pragma_is_not_a_technique():
    assert detect_techniques("// #pragma omp parallel for\n/* _mm256_add_pd( */") == {}


def test_object_evidence():
    found = detect_techniques("void f(void) {}", frozenset({"GOMP_parallel"}),
                              frozenset({"prefetcht0"}))
    assert {"openmp", "prefetch"} <= set(found)


def test_stage_table_matches_seed():
    # Table I: each stage adds one technique; violations detected are SIMD/OMP/Pref
    assert stage_violations(detect_techniques(SIMD), 2) and not stage_violations(
        detect_techniques(SIMD), 3)
    assert stage_violations(detect_techniques(OMP), 3) and not stage_violations(
        detect_techniques(OMP), 4)
    assert stage_violations(detect_techniques(PREFETCH), 4) and not stage_violations(
        detect_techniques(PREFETCH), 5)
    assert not stage_violations(detect_techniques(TILED), 1)  # seed does not enforce blocking
    assert stage_violations(detect_techniques(TILED), 1, strict=True)
    assert STAGES[6] == STAGES[5]
    with pytest.raises(ValueError):
        stage_violations({}, 7)


@pytest.mark.parametrize("code, fragment", [
    ('#include "x.h"\n', "#include"), ("#include <cblas.h>\n", "cblas.h"),
    ("#include <unistd.h>\n", "unistd.h"), ("void f(){ asm(\"nop\"); }", "assembly"),
    ("void f(){ system(\"ls\"); }", "system"), ("void f(){ cblas_dgemm(1); }", "cblas_dgemm"),
    ("int main(void) { return 0; }", "main"),
    ("__attribute__((constructor)) void g(void) {}", "constructor"),
])
def test_source_rules(code, fragment):
    reason = check_source(code)
    assert reason and fragment in reason


def test_source_rules_allow_honest_code(dgemm):
    assert check_source(dgemm.expert.read_text(), dgemm.forbidden_calls) is None
    assert check_source('#include <omp.h>\n#include <immintrin.h>\nvoid f(){ char *s = "system(";'
                        ' }') is None
