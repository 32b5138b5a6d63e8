"""Task contracts beyond "outputs start as garbage": outputs that start zeroed, tolerances
relative to the whole result's magnitude, and wrong-answer messages that show the difference."""
import shutil

import numpy as np
import pytest

from perfgym import evaluate
from perfgym.outcome import Status
from perfgym.tasks import TaskError, load_task
from perfgym.verify import compare

SIZE = {"M": 32, "N": 24, "K": 16}

ACCUMULATING = """
void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++)
                C[i * N + j] += A[i * K + k] * B[k * N + j];
}
"""


def task_copy(tmp_path, dgemm, edit):
    directory = tmp_path / "dgemm_variant"
    shutil.copytree(dgemm.directory, directory)
    toml = directory / "task.toml"
    toml.write_text(edit(toml.read_text()))
    return directory


def zeroed(text: str) -> str:
    # the output C gets init = "zero" in its [arrays.C] table
    head, sep, rest = text.partition("[arrays.C]\n")
    assert sep, "dgemm's task.toml changed: update this test"
    return head + sep + 'init = "zero"\n' + rest


def test_an_accumulating_kernel_passes_when_the_output_starts_zeroed(tmp_path, dgemm, fast):
    task = load_task(task_copy(tmp_path, dgemm, zeroed))
    assert task.arrays["C"].init == "zero"
    o = evaluate(task, ACCUMULATING, SIZE, fast)
    assert o.status is Status.OK, o.message


def test_the_same_kernel_fails_when_the_output_starts_as_garbage(dgemm, fast):
    o = evaluate(dgemm, ACCUMULATING, SIZE, fast)
    assert o.status is Status.WRONG_ANSWER


def test_a_zeroed_output_is_zeroed_before_every_call_not_only_the_first(tmp_path, dgemm, fast):
    # accumulating twice into an output zeroed only once would double it on the timed calls
    task = load_task(task_copy(tmp_path, dgemm, zeroed))
    o = evaluate(task, ACCUMULATING, SIZE, fast.replace(min_samples=5))
    assert o.status is Status.OK and len(o.timing.samples) >= 5


def test_init_is_for_outputs_only(tmp_path, dgemm):
    def on_input(text):
        head, sep, rest = text.partition("[arrays.A]\n")
        return head + sep + 'init = "zero"\n' + rest
    with pytest.raises(TaskError, match="init"):
        load_task(task_copy(tmp_path, dgemm, on_input))


def test_an_unknown_tolerance_scale_is_refused(tmp_path, dgemm):
    def bad_scale(text):
        head, sep, rest = text.partition("[verify]\n")
        assert sep
        return head + sep + 'scale = "norm"\n' + rest
    with pytest.raises(TaskError, match="verify.scale"):
        load_task(task_copy(tmp_path, dgemm, bad_scale))


def test_array_scaled_tolerance_accepts_rounding_of_values_that_cancel():
    expected = np.array([1000.0, -1000.0, 1e-9])  # the last one: a sum that cancelled
    got = expected + np.array([0.0, 0.0, 5e-7])  # rounding on the scale of the whole result
    assert not compare("y", got, expected, 1e-6, 1e-12).ok
    assert compare("y", got, expected, 1e-6, 1e-12, scale="array").ok
    # and it still fails a real error
    assert not compare("y", expected + np.array([0, 0, 0.1]), expected, 1e-6, 1e-12,
                       scale="array").ok


def test_a_wrong_answer_shows_the_difference_when_values_print_alike():
    expected = np.array([1.0, 2.0])
    got = np.array([1.0, 2.0 + 4e-12])
    v = compare("y", got, expected, 0.0, 1e-13)
    assert not v.ok
    assert "off by 4e-12" in v.where and "allowed 1e-13" in v.where, v.where
    assert "= 2.000000000003999" in v.where and "but expected 2 (" in v.where, v.where


def test_wrong_answer_message_from_the_evaluator_has_the_difference(dgemm, fast):
    wrong = dgemm.baseline.read_text().replace("C[i * N + j] = sum;", "C[i * N + j] = sum + 1e-3;")
    o = evaluate(dgemm, wrong, SIZE, fast)
    assert o.status is Status.WRONG_ANSWER and "off by 0.001" in o.message, o.message


SUM_TOML = """
name = "total"
language = "{language}"
description = "The sum of x."
entry = "double total(const double *x, int n)"
returns = "result"
flops = "n"
bytes = "8*n"
reference = "x.sum()"
baseline = "naive.c"
[arrays.x]
shape = ["n"]
[arrays.result]
shape = []
role = "out"
[sizes]
default = {{ n = 1000 }}
[verify]
rtol = 1e-9
atol = 1e-9
"""
SUM_NAIVE = """double total(const double *x, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += x[i];
    return s;
}
"""


def sum_task(tmp_path, language="c"):
    directory = tmp_path / f"total_{language}"
    directory.mkdir()
    (directory / "task.toml").write_text(SUM_TOML.format(language=language))
    (directory / "naive.c").write_text(SUM_NAIVE)
    return load_task(directory)


@pytest.mark.parametrize("language", ["c", "cpp"])
def test_a_returned_value_is_the_answer(tmp_path, fast, language):
    task = sum_task(tmp_path, language)
    assert task.returns == "result" and task.signature.ret == "double"
    o = evaluate(task, SUM_NAIVE, None, fast)
    assert o.status is Status.OK, o.message
    wrong = evaluate(task, SUM_NAIVE.replace("return s;", "return s + 1.0;"), None, fast)
    assert wrong.status is Status.WRONG_ANSWER and wrong.message.startswith(
        "wrong answer on the first input set: result = "), wrong.message


def test_a_reference_may_use_array_methods(tmp_path, fast):
    # x.sum() imports inside NumPy: it crashed every evaluation when builtins were withheld
    o = evaluate(sum_task(tmp_path), SUM_NAIVE, None, fast)
    assert o.status is Status.OK, o.message


def test_returns_must_match_the_entry(tmp_path):
    directory = tmp_path / "bad"
    directory.mkdir()
    (directory / "naive.c").write_text(SUM_NAIVE)
    text = SUM_TOML.format(language="c")
    for broken, match in ((text.replace('returns = "result"\n', ""), "returns"),
                          (text.replace("shape = []", 'shape = ["n"]'), "shape = \\[\\]"),
                          (text.replace('entry = "double total', 'entry = "float total'),
                           "dtype float32")):
        (directory / "task.toml").write_text(broken)
        with pytest.raises(TaskError, match=match):
            load_task(directory)


SCAN_TOML = """
name = "scan"
description = "In place: x[i] becomes x[0] + ... + x[i]."
entry = "void scan(double *x, int n)"
flops = "n"
bytes = "16*n"
reference = "np.cumsum(x)"
baseline = "naive.c"
[arrays.x]
shape = ["n"]
role = "inout"
[sizes]
default = {{ n = {n} }}
[verify]
rtol = 1e-9
atol = 1e-9
"""
SCAN_NAIVE = """void scan(double *x, int n) {
    for (int i = 1; i < n; i++) x[i] += x[i - 1];
}
"""


def scan_task(tmp_path, n=4096):
    directory = tmp_path / "scan"
    directory.mkdir(exist_ok=True)
    (directory / "task.toml").write_text(SCAN_TOML.format(n=n))
    (directory / "naive.c").write_text(SCAN_NAIVE)
    return load_task(directory)


def test_an_in_place_kernel_is_given_its_input_and_judged_on_what_it_leaves(tmp_path, fast):
    task = scan_task(tmp_path)
    assert task.outputs == ["x"]
    o = evaluate(task, SCAN_NAIVE, None, fast.replace(min_samples=5))
    assert o.status is Status.OK, o.message
    # every call starts from the input: without the restore, the timed calls would scan a scan


def test_an_in_place_kernel_that_leaves_its_input_alone_is_wrong(tmp_path, fast):
    lazy = "void scan(double *x, int n) { (void)x; (void)n; }"
    o = evaluate(scan_task(tmp_path), lazy, None, fast)
    assert o.status is Status.WRONG_ANSWER and "first input set" in o.message


def test_an_in_place_kernel_wrong_only_on_timed_calls_is_caught(tmp_path, fast):
    # right on the first call of each process, then it scans one element short
    sly = """void scan(double *x, int n) {
    static int calls;
    int end = calls++ > 0 ? n - 1 : n;
    for (int i = 1; i < end; i++) x[i] += x[i - 1];
}"""
    o = evaluate(scan_task(tmp_path), sly, None, fast)
    assert o.status is Status.WRONG_ANSWER and "first input set" not in o.message, o.message


def test_an_in_place_kernel_writing_past_its_end_is_caught(tmp_path, fast):
    over = """void scan(double *x, int n) {
    for (int i = 1; i < n; i++) x[i] += x[i - 1];
    x[n] = x[n - 1];  /* one past the end */
}"""
    o = evaluate(scan_task(tmp_path, n=4095), over, None, fast)
    assert o.status in (Status.WRONG_ANSWER, Status.RUNTIME_ERROR), o.message


AXPY_TOML = """
name = "axpy"
description = "y = alpha * x + y, in place."
entry = "void axpy(double *y, const double *x, double alpha, float beta, int n)"
flops = "2*n"
bytes = "24*n"
reference = "alpha * x + y + beta"
baseline = "naive.c"
[scalars]
alpha = 2.5
beta = -0.25
[arrays.y]
shape = ["n"]
role = "inout"
[arrays.x]
shape = ["n"]
[sizes]
default = { n = 1000 }
[verify]
rtol = 1e-7
atol = 1e-7
"""
AXPY = """void axpy(double *y, const double *x, double alpha, float beta, int n) {
    for (int i = 0; i < n; i++) y[i] = alpha * x[i] + y[i] + beta;
}
"""


def axpy_task(tmp_path, toml=AXPY_TOML):
    directory = tmp_path / "axpy"
    directory.mkdir(exist_ok=True)
    (directory / "task.toml").write_text(toml)
    (directory / "naive.c").write_text(AXPY)
    return load_task(directory)


def test_floating_point_scalars_reach_the_kernel_and_the_reference(tmp_path, fast):
    task = axpy_task(tmp_path)
    assert task.scalars == {"alpha": 2.5, "beta": -0.25}
    assert evaluate(task, AXPY, None, fast).status is Status.OK
    # a kernel that ignores the scalar's value is wrong
    fixed = AXPY.replace("alpha * x[i]", "2.0 * x[i]")
    assert evaluate(task, fixed, None, fast).status is Status.WRONG_ANSWER


def test_a_floating_point_parameter_needs_a_value(tmp_path):
    with pytest.raises(TaskError, match="scalars.beta"):
        axpy_task(tmp_path, AXPY_TOML.replace("beta = -0.25\n", ""))
    with pytest.raises(TaskError, match="scalars.gamma"):
        axpy_task(tmp_path, AXPY_TOML.replace("beta = -0.25\n", "beta = -0.25\ngamma = 1.0\n"))
