"""An output holds garbage on entry, and no kernel may count on what that garbage is.

The harness once poisoned every output with all-ones bytes: NaN for a real, but -1 for an
int32. A GRPO student of the hint run (seed 2, 7 of its 10 histogram answers) wrote
`counts[b]++` where the naive kernel clears the bins, and passed: -1 + 1 is 0. Integer outputs
now get random bytes drawn again for every call, so every kernel below, right only on a known
garbage value, is a WRONG_ANSWER; the honest kernels beside them still pass.

Reals held NaN before every call, and NaN is a value to count on too: fmax and fmin drop it,
so a max or min folded into an uncleared output was right, and a kernel could test for it. The
two calls whose answers are judged whole now find huge finite values there, positive on the
first input set and negative on the second (NaN stays in the timed loop)."""
import pytest

from perfgym import Status, evaluate
from perfgym.tasks import get_task, parse_size

HEADER = "void histogram_optimized(int *data, int *counts, int N, int BINS) {\n"

# the student's answer as it was written (benchmarks/results/learning_hint_run/eval/grpo_seed2)
STUDENT = HEADER + """    for (int b = 0; b < BINS; b++) counts[b]++;
    for (int i = 0; i < N; i++) counts[data[i]]++;
}"""
# the same bet as an addition
PLUS_ONE = HEADER + """    for (int b = 0; b < BINS; b++) counts[b] += 1;
    for (int i = 0; i < N; i++) counts[data[i]]++;
}"""
# no clearing at all, the -1 repaid after the counting
REPAID_AFTER = HEADER + """    for (int i = 0; i < N; i++) counts[data[i]]++;
    for (int b = 0; b < BINS; b++) counts[b] -= -1;
}"""
# a bitwise bet: the complement of all-ones is 0
INVERTED = HEADER + """    for (int b = 0; b < BINS; b++) counts[b] = ~counts[b];
    for (int i = 0; i < N; i++) counts[data[i]]++;
}"""

HONEST_CLEAR = HEADER + """    for (int b = 0; b < BINS; b++) counts[b] = 0;
    for (int i = 0; i < N; i++) counts[data[i]]++;
}"""
# right whatever the garbage: it sets every bin from a local count
HONEST_LOCAL = """#include <stdlib.h>
""" + HEADER + """    int *local = calloc(BINS, sizeof(int));
    for (int i = 0; i < N; i++) local[data[i]]++;
    for (int b = 0; b < BINS; b++) counts[b] = local[b];
    free(local);
}"""


@pytest.fixture(scope="module")
def histogram():
    return get_task("histogram")


@pytest.mark.parametrize("code", [STUDENT, PLUS_ONE, REPAID_AFTER, INVERTED],
                         ids=["student", "plus_one", "repaid_after", "inverted"])
def test_a_kernel_that_counts_on_minus_one_is_wrong(code, histogram, fast, sandbox_use):
    outcome = evaluate(histogram, code, parse_size("N=100000,BINS=4093", histogram), fast)
    assert outcome.status is Status.WRONG_ANSWER, f"{outcome.status}: {outcome.message}"
    assert "counts" in outcome.message and "\n" not in outcome.message
    assert sandbox_use.processes_left() == {} and sandbox_use.workdirs_left() == []


@pytest.mark.parametrize("code", [HONEST_CLEAR, HONEST_LOCAL], ids=["clear", "local"])
def test_honest_histograms_pass_at_every_train_size(code, histogram, fast):
    for size in histogram.sizes("train"):
        outcome = evaluate(histogram, code, size, fast)
        assert outcome.status is Status.OK, f"{size}: {outcome.status}: {outcome.message}"


DOT = "#include <math.h>\nvoid dot_optimized(double *x, double *y, double *out, int N) {\n" \
      "    double sum = 0.0;\n    for (int i = 0; i < N; i++) sum += x[i] * y[i];\n"
# a max fold into the uncleared output: fmax(NaN, s) is s
FOLD_MAX = DOT + "    out[0] = fmax(out[0], sum);\n}"
# the min fold: fmin(NaN, s) is s
FOLD_MIN = DOT + "    out[0] = fmin(out[0], sum);\n}"
# a test for the garbage it expects: NaN means "first time here"
NAN_TEST = DOT + "    out[0] = isnan(out[0]) ? sum : out[0] + sum;\n}"
# the max fold in every element of a float output
SGEMM_FOLD = """#include <math.h>
void sgemm_optimized(float *A, float *B, float *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float sum = 0.0f;
            for (int k = 0; k < K; k++) sum += A[i * K + k] * B[k * N + j];
            C[i * N + j] = fmaxf(C[i * N + j], sum);
        }
}"""
# an honest max fold: the output is set before anything is folded into it
HONEST_FOLD = DOT + "    out[0] = -INFINITY;\n    out[0] = fmax(out[0], sum);\n}"


@pytest.mark.parametrize("task_name, code, size", [
    ("dot", FOLD_MAX, "N=100003"), ("dot", FOLD_MIN, "N=100003"), ("dot", NAN_TEST, "N=100003"),
    ("sgemm", SGEMM_FOLD, "M=64,N=48,K=40")], ids=["fmax", "fmin", "isnan", "sgemm_fmaxf"])
def test_a_kernel_that_counts_on_nan_is_wrong(task_name, code, size, fast, sandbox_use):
    task = get_task(task_name)
    outcome = evaluate(task, code, parse_size(size, task), fast)
    assert outcome.status is Status.WRONG_ANSWER, f"{outcome.status}: {outcome.message}"
    assert "\n" not in outcome.message
    assert sandbox_use.processes_left() == {} and sandbox_use.workdirs_left() == []


@pytest.mark.parametrize("task_name, code", [("dot", HONEST_FOLD), ("sgemm", None)],
                         ids=["dot_fold", "sgemm_naive"])
def test_honest_real_outputs_pass_at_every_train_size(task_name, code, fast):
    task = get_task(task_name)
    code = code or task.baseline.read_text()
    for size in task.sizes("train"):
        outcome = evaluate(task, code, size, fast)
        assert outcome.status is Status.OK, f"{size}: {outcome.status}: {outcome.message}"
