"""`perfgym tasks import pareval`: ParEval's problems as perfgym tasks, checked against ParEval's
own serial solutions; and the `require` rule (ParEval's "an OpenMP solution must use OpenMP").

The import tests need a ParEval checkout (PERFGYM_PAREVAL_DIR, or /work/pareval) and skip
without one: nothing of ParEval ships with perfgym."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfgym import evaluate
from perfgym.executors import Request, evaluate_many
from perfgym.outcome import Status
from perfgym.tasks import BUILTIN_DIR, TaskError, load_task
from perfgym.tasks.pareval import import_pareval

CHECKOUT = Path(os.environ.get("PERFGYM_PAREVAL_DIR", "/work/pareval"))
needs_pareval = pytest.mark.skipif(
    not (CHECKOUT / "prompts" / "generation-prompts.json").is_file(),
    reason=f"no ParEval checkout at {CHECKOUT} (set PERFGYM_PAREVAL_DIR)")

# ParEval's own solutions that are wrong by the prompt's contract (perfgym's reference follows the
# prompt): correctMaximumSubarray never resets its running sum between start points, so it
# returns the largest partial sum of x[0:], x[1:], ... laid end to end; correctConvexHull-
# Perimeter builds the lower hull from the third point from the right, so the polygon can miss
# hull points (a transcription of it is wrong on about 4 in 5 random sets of 17+ points).
PAREVAL_WRONG = {"34_scan_largest_contiguous_subarray_sum", "11_geometry_convex_hull_perimeter"}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("pareval")
    return out, import_pareval(CHECKOUT, out, require_parallel=True)


def problems():
    """The ParEval problems we translate (the others are skipped by the importer, with reasons
    that test_import_counts_and_reasons checks)."""
    if not (CHECKOUT / "prompts" / "generation-prompts.json").is_file():
        return []
    from perfgym.tasks.pareval import RECIPES, read_checkout
    return [p.name for p in read_checkout(CHECKOUT) if p.name in RECIPES]


@needs_pareval
def test_import_counts_and_reasons(imported):
    out, summary = imported
    assert len(summary["imported"]) + len(summary["skipped"]) == 60  # ParEval's problems
    assert len(summary["imported"]) >= 44
    assert all(s["reason"] for s in summary["skipped"])
    assert json.loads((out / "import.json").read_text()) == summary
    for name in summary["imported"]:
        for model in ("serial", "omp"):
            d = out / model / name
            assert (d / "task.toml").is_file() and (d / "baseline.cpp").is_file()
            assert (d / "prompt.txt").read_text().rstrip().endswith("{")  # ParEval's, verbatim


@needs_pareval
def test_every_imported_task_loads(imported):
    out, summary = imported
    for name in summary["imported"]:
        serial, omp = load_task(out / "serial" / name), load_task(out / "omp" / name)
        assert serial.language == omp.language == "cpp"
        assert serial.require == () and omp.require == ("openmp",)
        assert "OpenMP" in omp.description and "OpenMP" not in serial.description
        assert serial.entry == omp.entry


@needs_pareval
@pytest.mark.parametrize("problem", problems())
def test_pareval_serial_solution_passes(imported, problem, fast):
    """The key figure: ParEval's own serial solution, renamed to the entry, is OK at the
    smallest and the held-out sizes (the known-wrong ones fail)."""
    out, summary = imported
    assert problem in summary["imported"], summary["skipped"]  # translated, so imported
    task = load_task(out / "serial" / problem)
    source = (out / "serial" / problem / "baseline.cpp").read_text()
    sizes = task.sizes("smallest") + task.sizes("heldout")
    if problem in PAREVAL_WRONG:
        sizes = task.sizes("all")  # sizes enough that the bug shows whatever the inputs
    outcomes = evaluate_many([Request(task, source, size, fast) for size in sizes])
    statuses = {o.status for o in outcomes}
    if problem in PAREVAL_WRONG:
        assert Status.WRONG_ANSWER in statuses
    else:
        assert statuses == {Status.OK}, [o.message for o in outcomes if not o.ok]


AVERAGE_OMP = """#include <vector>
double average(std::vector<double> const& x) {
    double sum = 0.0;
    const long n = (long)x.size();
#pragma omp parallel for reduction(+:sum)
    for (long i = 0; i < n; i++) sum += x[i];
    return sum / (double)n;
}
"""


@needs_pareval
def test_omp_task_refuses_parevals_serial_solution(imported, fast):
    out, _ = imported
    task = load_task(out / "omp" / "27_reduce_average")
    serial = (out / "omp" / "27_reduce_average" / "baseline.cpp").read_text()
    o = evaluate(task, serial, {"N": 1000}, fast)
    assert o.status is Status.STAGE_VIOLATION and "requires OpenMP" in o.message
    o = evaluate(task, AVERAGE_OMP, {"N": 1000}, fast)
    assert o.status is Status.OK, o.message


@needs_pareval
def test_cli_import_json(tmp_path):
    run = subprocess.run([sys.executable, "-m", "perfgym.cli", "tasks", "import", "pareval",
                          str(CHECKOUT), "--out", str(tmp_path / "t"), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["require_parallel"] is False
    assert "require" not in (tmp_path / "t" / "omp" / summary["imported"][0] /
                             "task.toml").read_text()


def test_cli_import_refuses_a_directory_that_is_not_pareval(tmp_path):
    run = subprocess.run([sys.executable, "-m", "perfgym.cli", "tasks", "import", "pareval",
                          str(tmp_path), "--out", str(tmp_path / "t")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "is not a ParEval checkout" in run.stderr and "Traceback" not in run.stderr


# ---- the require rule (no ParEval needed) ------------------------------------------------------

SERIAL = """void dot_optimized(double *x, double *y, double *out, int N) {
    double s = 0.0;
    for (int i = 0; i < N; i++) s += x[i] * y[i];
    out[0] = s;
}
"""
OPENMP = """void dot_optimized(double *x, double *y, double *out, int N) {
    double s = 0.0;
#pragma omp parallel for reduction(+:s)
    for (int i = 0; i < N; i++) s += x[i] * y[i];
    out[0] = s;
}
"""
SIMD_ONLY = SERIAL.replace("    for", "#pragma omp simd reduction(+:s)\n    for")
MACRO = """#define PARALLEL _Pragma("omp parallel for reduction(+:s)")
""" + OPENMP.replace("#pragma omp parallel for reduction(+:s)", "PARALLEL")


def dot_task(tmp_path, require: str):
    d = tmp_path / "dot"
    shutil.copytree(BUILTIN_DIR / "dot", d)
    spec = d / "task.toml"
    spec.write_text(spec.read_text().replace('expert = "expert.c"\n',
                                             f'expert = "expert.c"\nrequire = {require}\n'))
    return load_task(d)


def test_require_openmp_refuses_a_serial_kernel(tmp_path, fast):
    task = dot_task(tmp_path, '["openmp"]')
    assert task.require == ("openmp",)
    o = evaluate(task, SERIAL, {"N": 10000}, fast)
    assert o.status is Status.STAGE_VIOLATION
    assert "requires OpenMP" in o.message


def test_require_openmp_passes_an_openmp_kernel(tmp_path, fast):
    task = dot_task(tmp_path, '["openmp"]')
    for kernel in (OPENMP, MACRO):
        o = evaluate(task, kernel, {"N": 10000}, fast)
        assert o.status is Status.OK, o.message
        assert "openmp" in o.techniques


def test_require_openmp_is_not_met_by_simd_alone(tmp_path, fast):
    o = evaluate(dot_task(tmp_path, '["openmp"]'), SIMD_ONLY, {"N": 10000}, fast)
    assert o.status is Status.STAGE_VIOLATION


def test_without_require_a_serial_kernel_passes(tmp_path, fast):
    o = evaluate(dot_task(tmp_path, "[]"), SERIAL, {"N": 10000}, fast)
    assert o.status is Status.OK, o.message


def test_require_names_a_known_technique(tmp_path):
    with pytest.raises(TaskError, match="field 'require'"):
        dot_task(tmp_path, '["gpu"]')
