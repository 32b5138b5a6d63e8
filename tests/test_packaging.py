"""perfgym as a package index delivers it: the wheel and the installed package hold every file
the code opens at run time (templates, harness sources, tasks, variants, recipes, GPU problems),
and the CLI works from any directory."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "src" / "perfgym"


def package_files() -> set[str]:
    """Every file of the package in the source tree, relative to it."""
    return {str(p.relative_to(SOURCE)) for p in SOURCE.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def test_the_source_tree_has_the_run_time_files():
    files = package_files()
    for needed in ("prompts/templates/generate.txt", "harness/harness.c",
                   "harness/torch_worker.py", "harness/peak.c", "tasks/builtin/dgemm/task.toml",
                   "tasks/builtin_gpu/relu.py", "train/variants/dgemm__ikj_loop_order.c",
                   "recipes/online_rl_exp1_fixed.toml"):
        assert needed in files


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory):
    """This tree built as a wheel and installed into a directory of its own (no dependencies:
    this environment supplies them), whichever way the tests' own perfgym was installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                    str(tmp / "dist"), str(REPO)], check=True, capture_output=True)
    wheel = next((tmp / "dist").glob("perfgym-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(tmp / "site"), str(wheel)], check=True, capture_output=True)
    return wheel, tmp / "site"


@pytest.mark.slow
def test_the_wheel_holds_every_package_file(installed_wheel):
    wheel, _ = installed_wheel
    inside = {name.removeprefix("perfgym/") for name in zipfile.ZipFile(wheel).namelist()
              if name.startswith("perfgym/")}
    missing = sorted(package_files() - inside)
    assert missing == [], f"not in the wheel: {missing}"


@pytest.mark.slow
def test_the_installed_wheel_runs_from_any_directory(installed_wheel, tmp_path):
    _, site = installed_wheel
    missing = sorted(f for f in package_files() if not (site / "perfgym" / f).is_file())
    assert missing == [], f"not in the installed package: {missing}"
    r = subprocess.run([sys.executable, "-c", "import perfgym, sys; print(perfgym.__file__); "
                        "sys.argv = ['perfgym', 'tasks', 'show', 'dgemm']; "
                        "from perfgym.cli import main; main()"],
                       capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith(str(site))  # that copy, not the source tree or another install
    assert "void matmul_optimized(double *A" in r.stdout and "code block" in r.stdout


def test_tasks_show_works_from_any_directory(tmp_path):
    r = subprocess.run([sys.executable, "-m", "perfgym.cli", "tasks", "show", "dgemm"],
                       capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr[-2000:]
    # the prompt comes from a packaged template
    assert "void matmul_optimized(double *A" in r.stdout and "code block" in r.stdout
