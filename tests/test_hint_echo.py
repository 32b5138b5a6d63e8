"""benchmarks/hint_echo.py: the hint's clauses counted in a learning run's answers."""
import importlib.util
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
spec = importlib.util.spec_from_file_location("hint_echo", BENCHMARKS / "hint_echo.py")
he = importlib.util.module_from_spec(spec)
spec.loader.exec_module(he)

HIST_HINT = """void histogram(const int *x, int n, int *counts) {
    #pragma omp parallel for reduction( + : counts[:n] )
    for (int i = 0; i < n; i++) counts[x[i]]++;
}"""
HIST_OWN = """void histogram(const int *x, int n, int *counts) {
    int local[256] = {0};
    #pragma omp parallel for reduction(+:local[:256])
    for (int i = 0; i < n; i++) local[x[i]]++;
}"""
DOT_OWN = """double dot(const double *a, const double *b, int n) {
    double sum = 0.0;
    #pragma omp parallel for reduction(+:sum)
    for (int i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}"""
DGEMV_NO_SUM = """void dgemv(const double *A, const double *x, double *y, int m, int n) {
    for (int i = 0; i < m; i++) {
        #pragma omp simd reduction(+:sum)
        for (int j = 0; j < n; j++) y[i] += A[i * n + j] * x[j];
    }
}"""


def row(arm, split, task, status, code):
    return {"arm": arm, "split": split, "task": task, "status": status, "code": code}


def test_clauses_are_read_with_white_space_removed_and_sections_kept():
    assert he.clauses(HIST_HINT) == ["reduction(+:counts[:n])"]
    assert he.clauses(HIST_OWN) == ["reduction(+:local[:256])"]
    assert he.clauses("#pragma omp parallel for reduction(max:m) reduction(+: s, t)") == [
        "reduction(max:m)", "reduction(+:s,t)"]
    assert he.clauses(None) == []


def test_echo_counts_the_hints_clauses_and_a_sum_the_kernel_lacks():
    rows = [row("control", "heldout_task", "histogram", "COMPILE_ERROR", HIST_HINT),
            row("control", "heldout_task", "histogram", "COMPILE_ERROR", HIST_OWN),
            row("control", "heldout_task", "histogram", "OK", HIST_HINT),
            row("control", "train", "dot", "OK", DOT_OWN),
            row("control", "train", "dgemv", "COMPILE_ERROR", DGEMV_NO_SUM),
            row("base", "train", "dot", "OK", "double dot(void) { return 0; }")]
    counts = he.echo(rows)
    assert counts["control"] == {
        "histogram_answers": 3, "histogram_not_built": 2,
        "histogram_not_built_with_hint_clause": 1,
        "histogram_reduction_clauses": 3, "histogram_hint_clauses": 2,
        "train_answers": 2, "train_with_sum_clause": 2, "train_sum_clause_without_sum": 1}
    assert counts["base"]["train_with_sum_clause"] == 0
    assert counts["base"]["histogram_answers"] == 0


@pytest.mark.parametrize("content, message", [
    (None, "is not a learning_speed.py --json report"),
    ("{not json", "is not a learning_speed.py --json report"),
    (json.dumps({"settings": {}}), "no per_sample"),
    (json.dumps({"per_sample": [{"arm": "base"}]}), "keeps no answer code"),
])
def test_bad_input_is_one_line_and_exit_2(content, message, tmp_path, capsys):
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as exc:
        he.main([str(path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_json_output_holds_each_report_by_path(tmp_path):
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"per_sample": [
        row("grpo", "heldout_task", "histogram", "COMPILE_ERROR", HIST_HINT)]}))
    he.main([str(report), "--json", str(tmp_path / "out.json")])
    out = json.loads((tmp_path / "out.json").read_text())
    assert out[str(report)]["grpo"]["histogram_not_built_with_hint_clause"] == 1
