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
    reason=f"no ParEval checkout at {CHECKOUT}: ParEval is third-party and not shipped; clone "
           "it and set PERFGYM_PAREVAL_DIR")

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


# ---- the translation table, pareval_recipes.toml (no ParEval needed) ---------------------------

def test_every_recipe_loads_and_its_sizes_evaluate():
    from perfgym.tasks.pareval import RECIPES, RECIPES_FILE, load_recipes
    recipes, untranslated = load_recipes(RECIPES_FILE)
    assert recipes.keys() == RECIPES.keys() and len(recipes) >= 44
    assert untranslated and set(untranslated).isdisjoint(recipes)
    for name, recipe in recipes.items():
        for p in (1, 1 << 20):
            sizes = recipe.sizes(p)
            assert sizes.keys() == recipe.train[0].keys(), name
            assert all(type(v) is int for v in sizes.values()), (name, p, sizes)
        # the default when ParEval gives no size; at p = 1 some derived sizes are 0 (K = p // 4)
        assert all(v > 0 for v in recipe.sizes(1 << 20).values()), name
        for source in (recipe.inputs, recipe.reference):
            if source and source.startswith(("def ", "import ", "from ")):
                compile(source, name, "exec")  # a snippet and its parameters make Python


def test_a_sizes_expression_evaluates():
    from perfgym.tasks.pareval import size_expression
    assert size_expression("min(p, 512) // 4")(1000) == 128
    assert size_expression("min(p, 256) * min(p, 256) // 10 + min(p, 256)")(1 << 20) == 6809
    assert size_expression("max(p - 2, 1, 3)")(2) == 3
    assert size_expression(" (p + 1_000) * 2 ")(1) == 2002


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "p.bit_length()", "p.__class__", "(lambda: 1)()",
    "lambda p: p", "[p]", "p ** 2", "p / 2", "p << 1", "-p", "2.5", "True", "'p'", "q", "min(p)",
    "min(*[p, 1])", "max(p, 1, key=abs)", "p if p else 1", "import os", "p; p", ""])
def test_a_sizes_expression_is_checked_never_evaluated(text, monkeypatch):
    from perfgym.tasks.pareval import size_expression
    monkeypatch.setattr(os, "system", lambda *a: pytest.fail("os.system was called"))
    with pytest.raises(TaskError, match=r"sizes expression .*(is not allowed|is not an expression)"
                                        r".*allowed: integers, p, min"):
        size_expression(text)


def test_a_bad_recipe_is_refused_naming_the_problem_and_key(tmp_path):
    from perfgym.tasks.pareval import load_recipes
    recipe = ('[recipes."99_x"]\nshapes = {x = ["N"]}\ntrain = [{N = 2}]\nheldout = [{N = 1}]\n'
              'flops = "N"\nbytes = "8*N"\nreference = "x"\n')
    path = tmp_path / "recipes.toml"
    path.write_text(recipe + 'sizes = {N = "min(p, 8)", M = "p.__class__"}\n')
    with pytest.raises(TaskError, match=r'\[recipes."99_x"\]: sizes.M: sizes expression'):
        load_recipes(path)
    path.write_text(recipe + 'sizes = {N = "p"}\nheldot = []\n')
    with pytest.raises(TaskError, match=r"unknown keys \['heldot'\]"):
        load_recipes(path)
    path.write_text(recipe + 'sizes = {N = "p"}\ninputs_snippets = ["g"]\n[snippets]\ng = "E = $E"\n')
    with pytest.raises(TaskError, match=r"snippet 'g' needs snippet_params \['E'\]"):
        load_recipes(path)
