"""Bad input to the command line, run as a user would run it: every form is one line on stderr
that says what is wrong, exit status 2, no traceback, and no hang (each is refused up front)."""
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfgym.tasks.spec import BUILTIN_DIR

NAIVE = str(BUILTIN_DIR / "dgemm" / "naive.c")
# Every refusal below comes before anything is compiled or run: a few seconds at most even on a
# busy machine (the 50 MB file and the 3e9-element size used to hang or grow the process).
DEADLINE = 60


def perfgym(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfgym.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=DEADLINE, stdin=subprocess.DEVNULL,
                          env={**os.environ, "COLUMNS": "200"})


def broken_task(root: Path, name: str, edit=None, source: str = "dgemm", files=None) -> str:
    """A copy of a built-in task with its task.toml edited and files replaced."""
    d = root / name
    shutil.copytree(BUILTIN_DIR / source, d)
    if edit:
        (d / "task.toml").write_text(edit((d / "task.toml").read_text()))
    for fname, text in (files or {}).items():
        (d / fname).write_text(text)
    return str(d)


def replace(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new)
    return edit


@pytest.fixture(scope="module")
def w(tmp_path_factory) -> Path:
    """The files the bad inputs name."""
    w = tmp_path_factory.mktemp("bad")
    (w / "loop").symlink_to(w / "loop")
    with open(w / "big.c", "wb") as f:  # 50 MB, sparse: refused by its size, never read
        f.truncate(50 << 20)
    (w / "binary.c").write_bytes(b"\x00\xff\xfe" * 100)
    (w / "file").write_text("x")
    (w / "replay.jsonl").write_text('{"completion": "x"}\n')
    (w / "garbage.jsonl").write_text("not json\n")
    (w / "corrupt").mkdir()
    (w / "corrupt" / "run.sqlite").write_bytes(b"this is not a database" * 100)
    (w / "foreign").mkdir()
    with sqlite3.connect(w / "foreign" / "run.sqlite") as db:
        db.execute("CREATE TABLE candidates (x)")
    tasks = {
        "verify_not_table": lambda text: "verify = 5\n" + text.replace("[verify]", "[old]"),
        "forbidden_int": replace('forbidden_calls = ["cblas_dgemm", "dgemm_", "dgemm", '
                                 '"cblas_sgemm", "mkl_", "openblas_"]', "forbidden_calls = 5"),
        "forbidden_ints": replace('forbidden_calls = ["cblas_dgemm",', "forbidden_calls = [5,"),
        "shape_int": replace('shape = ["M", "K"]', "shape = 5"),
        "shape_table": replace('shape = ["M", "K"]', "shape = [{ a = 1 }]"),
        "size_string": replace("default = { M = 256", 'default = { M = "256"'),
        "size_float": replace("default = { M = 256", "default = { M = 256.5"),
        "size_zero": replace("default = { M = 256", "default = { M = 0"),
        "size_huge": replace("default = { M = 256, N = 256, K = 256 }",
                             "default = { M = 200000, N = 200000, K = 1 }"),
        "train_not_list": replace("train = [", "train = 5\nxtrain = ["),
        "reference_syntax": replace('reference = "A @ B"', 'reference = "A @@ B"'),
        "reference_name": replace('reference = "A @ B"', 'reference = "A @ Q"'),
        "dtype_list": replace('dtype = "float64"\nrole = "out"',
                              'dtype = ["float64"]\nrole = "out"'),
        "role_int": replace('role = "out"', "role = 3"),
        "rtol_string": replace("rtol = 1e-6", 'rtol = "tight"'),
        "description_int": replace('description = """', 'description = 5\nxdescription = """'),
        "language_list": replace('language = "c"', 'language = ["c"]'),
        "perturb_list": replace('role = "in"', 'role = "in"\nperturb = ["x"]'),
    }
    for name, edit in tasks.items():
        broken_task(w, name, edit)
    broken_task(w, "reference_py_syntax", source="jacobi2d",
                files={"reference.py": "def reference(:\n"})
    broken_task(w, "reference_py_no_function", source="jacobi2d",
                files={"reference.py": "import numpy as np\n\ndef other(A, N, T):\n    return A\n"})
    broken_task(w, "inputs_py_syntax", source="spmv", files={"inputs.py": "def make_inputs(\n"})
    return w


# (arguments with {w} for the files above, a fragment the one line must hold)
CASES = [
    # files
    (["eval", "{w}/loop", "--size", "8"], "Too many levels of symbolic links"),
    (["eval", "{w}/big.c", "--size", "8"], "over 1 MiB"),
    (["eval", "/dev/zero", "--size", "8"], "over 1 MiB"),
    (["eval", "{w}/binary.c", "--size", "8"], "not a text file"),
    (["eval", "{w}", "--size", "8"], "is a directory"),
    (["eval", "{w}/missing.c", "--size", "8"], "no such file"),
    # sizes
    (["eval", NAIVE, "--size", "M=3000000000,N=1,K=1"], "does not fit the entry's `int M`"),
    (["eval", NAIVE, "--size", "100000000000"], "at most 2147483647"),
    (["eval", NAIVE, "--size", "M=2000000000,N=2000,K=2"], "GiB available"),
    (["eval", NAIVE, "--size", "8.5"], "whole numbers"),
    (["eval", NAIVE, "--size", "M=8.0,N=8,K=8"], "whole numbers"),
    (["eval", NAIVE, "--size", "1e3"], "whole numbers"),
    (["eval", NAIVE, "--size", "9" * 5000], "whole numbers"),
    (["eval", NAIVE, "--size", ""], "whole numbers"),
    (["eval", NAIVE, "--size", "0"], "positive integer"),
    (["eval", NAIVE, "--size", "M=-3,N=8,K=8"], "positive integer"),
    (["eval", NAIVE, "--size", "M=8,M=9,N=8,K=8"], "gives M twice"),
    (["eval", NAIVE, "--size", "M=8"], "must give exactly"),
    # numbers
    (["eval", NAIVE, "--size", "8", "--timeout", "inf"], "--timeout"),
    (["eval", NAIVE, "--size", "8", "--timeout", "1e12"], "at most 86400"),
    (["eval", NAIVE, "--size", "8", "--timeout", "nan"], "--timeout"),
    (["eval", NAIVE, "--size", "8", "--timeout", "0"], "more than 0"),
    (["eval", NAIVE, "--size", "8", "--timeout", "-1"], "more than 0"),
    (["eval", NAIVE, "--size", "8", "--threads", "0"], "threads"),
    (["eval", NAIVE, "--size", "8", "--threads", "100000"], "four per core"),
    (["eval", NAIVE, "--size", "8", "--march", "foo bar"], "--march foo bar"),
    (["eval", NAIVE, "--size", "8", "--cc", "gcc; rm -rf x"], "not found"),
    (["bench-suite", "--tasks", "dot", "--timeout", "inf"], "--timeout"),
    (["tasks", "selfcheck", "{w}", "--timeout", "0"], "--timeout"),
    # task directories
    (["eval", "--task", "{w}/verify_not_table", "--size", "8"], "field 'verify' must be a table"),
    (["eval", "--task", "{w}/forbidden_int", "--size", "8"], "field 'forbidden_calls' must be"),
    (["eval", "--task", "{w}/forbidden_ints", "--size", "8"], "list of function names"),
    (["eval", "--task", "{w}/shape_int", "--size", "8"], "field 'arrays.A.shape' must be"),
    (["eval", "--task", "{w}/shape_table", "--size", "8"], "field 'arrays.A.shape' must list"),
    (["eval", "--task", "{w}/size_string", "--size", "8"], "'sizes.default.M' must be a posit"),
    (["eval", "--task", "{w}/size_float", "--size", "8"], "'sizes.default.M' must be a posit"),
    (["eval", "--task", "{w}/size_zero", "--size", "8"], "'sizes.default.M' must be a posit"),
    (["eval", "--task", "{w}/train_not_list", "--size", "8"], "field 'sizes.train' must be"),
    (["eval", "--task", "{w}/size_huge"], "GiB available"),
    (["eval", "--task", "{w}/reference_syntax", "--size", "8"], "is not a Python expression"),
    (["eval", "--task", "{w}/reference_name", "--size", "8"], "uses 'Q'"),
    (["eval", "--task", "{w}/reference_py_syntax", "--size", "8"], "reference.py is not valid"),
    (["eval", "--task", "{w}/reference_py_no_function", "--size", "8"], "must define reference"),
    (["eval", "--task", "{w}/inputs_py_syntax", "--size", "8"], "inputs.py is not valid"),
    (["eval", "--task", "{w}/dtype_list", "--size", "8"], "'arrays.C.dtype' must be a string"),
    (["eval", "--task", "{w}/role_int", "--size", "8"], "'arrays.C.role' must be a string"),
    (["eval", "--task", "{w}/rtol_string", "--size", "8"], "'verify.rtol' must be"),
    (["eval", "--task", "{w}/description_int", "--size", "8"], "'description' must be"),
    (["eval", "--task", "{w}/language_list", "--size", "8"], "'language' must be a string"),
    (["eval", "--task", "{w}/perturb_list", "--size", "8"], "'arrays.A.perturb' must be"),
    (["tasks", "show", "{w}/shape_int"], "field 'arrays.A.shape' must be"),
    # runs
    (["report", "{w}/corrupt"], "not a readable run store"),
    (["report", "{w}/foreign"], "not a readable run store"),
    (["report", "{w}/file"], "holds no run"),
    (["search", "--replay", "{w}/replay.jsonl", "--task", "dot", "--run-dir", "{w}/file"],
     "is a file"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r1", "--algo", "best-of-n",
      "--n", "0"], "--n, --turns and --chains"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r2", "--algo", "refine",
      "--turns", "0"], "--n, --turns and --chains"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r3", "--temperature", "-1"],
     "--temperature"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r4", "--max-tokens", "0"],
     "--max-tokens"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r5", "--restarts", "0"],
     "--restarts is at least 1"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r6", "--budget-minutes", "-1"],
     "--budget-minutes above 0"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r7", "--algo", "evolve",
      "--restarts", "2"], "are SQD's"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r8", "--algo", "climb",
      "--transforms", "loop_order,magic"], "transforms are among"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r9", "--algo", "climb",
      "--task", "relu"], "PyTorch problem"),
    (["search", "--replay", "{w}/replay.jsonl", "--run-dir", "{w}/r10", "--algo", "evolve",
      "--budget-minutes", "0"], "--budget-minutes above 0"),
    (["pairs", "split", "{w}/replay.jsonl", "--out-dir", "{w}/split", "--test-fraction", "2"],
     "--test-fraction"),
    (["pairs", "clean", "{w}/garbage.jsonl", "--out", "{w}/out.jsonl"], "not a pair record"),
    # the service, refused before it starts
    (["serve", "--no-auth", "--port", "99999"], "--port"),
    (["serve", "--no-auth", "--port", "-1"], "--port"),
    (["serve", "--no-auth", "--max-batch", "0"], "--max-batch"),
    (["serve", "--no-auth", "--max-body", "-5"], "--max-body"),
    (["serve", "--no-auth", "--host", "not a host", "--port", "18797"], "cannot serve on"),
]


@pytest.mark.parametrize("args, fragment", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_input_is_one_line_exit_2(w, args, fragment):
    started = time.monotonic()
    r = perfgym(*(a.replace("{w}", str(w)) for a in args), cwd=w)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:], r.stdout[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    assert fragment in lines[0]
    assert "Traceback" not in r.stderr + r.stdout
    assert time.monotonic() - started < DEADLINE


def test_busy_port_is_one_line(w):
    import socket
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        r = perfgym("serve", "--no-auth", "--port", str(held.getsockname()[1]), cwd=w)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "cannot serve on 127.0.0.1" in r.stderr and "Traceback" not in r.stderr


def test_stdin_over_the_limit_is_refused(w):
    r = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", "-", "--size", "8"],
                       input="int x;\n" * 300_000, capture_output=True, text=True,
                       timeout=DEADLINE, cwd=w)
    assert r.returncode == 2 and "stdin is over 1 MiB" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_report_of_an_empty_run_and_of_every_status(tmp_path):
    from perfgym.outcome import Status
    from perfgym.store import RunStore
    empty = RunStore(tmp_path / "empty")
    empty.close()
    r = perfgym("report", str(tmp_path / "empty"), cwd=tmp_path)
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr[-2000:]
    store = RunStore(tmp_path / "all")
    for i, status in enumerate(Status):  # HOST_ERROR too: a status the plots had no colour for
        cid = store.add_pending(f"s{i}", 0, 1 + i % 6, None, "generate", "replay", "p", "c")
        store.complete(cid, {"status": status.value, "message": status.value}, 0.0)
    store.close()
    r = perfgym("report", str(tmp_path / "all"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "HOST_ERROR" in (tmp_path / "all" / "report" / "summary.md").read_text()


def test_a_cache_directory_that_is_a_file_is_one_line(w):
    """The host's fault, met inside the batch: the verdict line says HOST_ERROR (no traceback)
    and the command ends with one line and exit 2."""
    r = subprocess.run([sys.executable, "-m", "perfgym.cli", "eval", NAIVE, "--size", "8"],
                       capture_output=True, text=True, timeout=DEADLINE, cwd=w,
                       env={**os.environ, "COLUMNS": "200", "PERFGYM_CACHE_DIR": str(w / "file")})
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: 1 of 1: the host failed"), lines
    assert "HOST_ERROR" in r.stdout and "Traceback" not in r.stdout + r.stderr
