"""The command line, run as a user would run it."""
import json
import os
import subprocess
import sys

import pytest


def perfgym(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "perfgym.cli", *args], capture_output=True,
                          text=True, input=stdin, env={**os.environ, "COLUMNS": "200"})


def test_eval_json_on_a_model_answer(tmp_path, dgemm):
    answer = tmp_path / "answer.md"
    answer.write_text("Here you go:\n```c\n" + dgemm.baseline.read_text() + "```\n")
    r = perfgym("eval", str(answer), "--size", "32", "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "OK" and out["sizes"] == {"M": 32, "N": 32, "K": 32}
    assert out["reward"] == pytest.approx(out["gflops"])
    assert out["speedup"] is not None and out["machine"]["peak_gflops"] > 0


def test_eval_reads_stdin_and_reports_failure(dgemm):
    r = perfgym("eval", "-", "--size", "16", "--json", stdin="int x = ;")
    out = json.loads(r.stdout)
    assert out["status"] == "FORMAT_ERROR" and out["reward"] == -100


def test_eval_text_verdict_for_compile_error(tmp_path, dgemm):
    f = tmp_path / "k.c"
    f.write_text(dgemm.baseline.read_text().replace("sum +=", "sum += nope +"))
    r = perfgym("eval", str(f), "--size", "16", "--reward", "weighted")
    assert r.returncode == 0
    assert "COMPILE_ERROR" in r.stdout and "nope" in r.stdout and "reward (weighted) 0.00" in r.stdout


def test_eval_several_sizes_prints_geomean(dgemm):
    r = perfgym("eval", str(dgemm.baseline), "--size", "16", "--size", "M=7,N=9,K=5")
    assert r.returncode == 0, r.stderr
    assert "2/2 sizes OK" in r.stdout and "geometric mean" in r.stdout


@pytest.mark.parametrize("args, fragment", [
    (["eval", "missing.c"], "no such file"),
    (["eval", "--task", "nope"], "no task 'nope'"),
    (["eval", "--opt", "O7"], "optimization level"),
    (["eval", "--stage", "9"], "stage 9"),
    (["eval", "--size", "M=1"], "must give exactly"),
    (["eval", "--reward", "best"], "reward scheme"),
    (["eval", "--sizes", "most"], "size set"),
    (["eval", "--cc", "no-such-cc"], "not found"),
    (["tasks", "show", "nope"], "no task"),
])
def test_user_errors_are_one_line(args, fragment):
    r = perfgym(*args)
    assert r.returncode == 2
    assert fragment in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_tasks_and_machine_json():
    r = perfgym("tasks", "--json")
    assert r.returncode == 0 and any(t["name"] == "dgemm" for t in json.loads(r.stdout))
    r = perfgym("tasks", "show", "dgemm")
    assert r.returncode == 0 and "matmul_optimized" in r.stdout
    r = perfgym("machine", "--json")
    info = json.loads(r.stdout)
    assert r.returncode == 0 and info["peak_gflops"] > 0 and "isa" in info["fingerprint"]
    # the sandboxed Python is started, not assumed: it imports numpy (and torch when here)
    py = info["sandbox_python"]
    assert py["starts"] and py["error"] is None and "numpy" in py["modules"]


def test_machine_shows_a_sandboxed_python_that_cannot_start(tmp_path):
    """A broken layout is seen in `perfgym machine`, before any candidate: here a `torch` on
    PYTHONPATH that fails to import (the host never imports torch for this command)."""
    tmp_path.chmod(0o755)  # pytest's are 700: a folder the sandbox cannot read, another case
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('a broken torch')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "perfgym.cli", "machine", "--json"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    py = json.loads(r.stdout)["sandbox_python"]
    assert not py["starts"] and "a broken torch" in py["error"]
    r = subprocess.run([sys.executable, "-m", "perfgym.cli", "machine"], capture_output=True,
                       text=True, env=env)
    assert "BROKEN" in r.stdout and "a broken torch" in r.stdout


def test_eval_of_a_pytorch_task_with_no_files_judges_the_reference_as_itself():
    """The first thing a newcomer sees on a GPU task is not the tool failing its own file: the
    reference is run as a plain-PyTorch candidate (about 1.0x), beside the task's expert."""
    pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
    r = perfgym("eval", "--task", "relu", "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    outcomes = json.loads(r.stdout)
    statuses = {o["status"] for o in outcomes}
    assert statuses == {"OK"}, [(o["status"], o["message"]) for o in outcomes]
    reference = outcomes[0]
    assert 0.3 < reference["speedup"] < 3.0, reference["message"]  # the same code, twice
