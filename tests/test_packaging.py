"""perfgym as a package index delivers it: the wheel and the installed package hold every file
the code opens at run time (templates, harness sources, tasks, variants, recipes, GPU problems),
and the CLI works from any directory."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import perfgym

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
                   "recipes/seed000_exp1_fixed.toml"):
        assert needed in files


@pytest.mark.slow
def test_the_wheel_holds_every_package_file(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                    str(tmp_path), str(REPO)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("perfgym-*.whl"))
    inside = {name.removeprefix("perfgym/") for name in zipfile.ZipFile(wheel).namelist()
              if name.startswith("perfgym/")}
    missing = sorted(package_files() - inside)
    assert missing == [], f"not in the wheel: {missing}"


def test_the_installed_package_holds_every_file():
    installed = Path(perfgym.__file__).resolve().parent
    if installed == SOURCE.resolve():
        assert not os.environ.get("PERFGYM_EXPECT_INSTALLED"), (
            "the tests import perfgym from the source tree, not the installed wheel")
        pytest.skip("perfgym is imported from the source tree (editable install)")
    missing = sorted(f for f in package_files() if not (installed / f).is_file())
    assert missing == [], f"not in the installed package: {missing}"


def test_tasks_show_works_from_any_directory(tmp_path):
    r = subprocess.run([sys.executable, "-m", "perfgym.cli", "tasks", "show", "dgemm"],
                       capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr[-2000:]
    # the prompt comes from a packaged template
    assert "void matmul_optimized(double *A" in r.stdout and "code block" in r.stdout
