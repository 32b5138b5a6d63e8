"""benchmarks/forgetting_screen.py: its sorting of answers, and its bad input (no model run)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
spec = importlib.util.spec_from_file_location("forgetting_screen",
                                              BENCHMARKS / "forgetting_screen.py")
screen = importlib.util.module_from_spec(spec)
sys.path.insert(0, str(BENCHMARKS))
spec.loader.exec_module(screen)

LOOP = "    for (int i = 0; i < N; i++) {"


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def test_answers_sort_by_the_pragma_they_add():
    assert screen.kind(block(LOOP, LOOP)) == "no pragma"  # the hand-back
    assert screen.kind(block(LOOP, "    #pragma omp parallel for if(N > 16)\n" + LOOP)) == \
        "parallel, no reduction"  # the race on a scan
    assert screen.kind(block(LOOP, "    #pragma omp parallel for reduction(+:sum) "
                                   "if(N > 16)\n" + LOOP)) == "reduction"
    assert screen.kind(block(LOOP, "    #pragma omp simd reduction(+:sum)\n" + LOOP)) == \
        "reduction"
    assert screen.kind(block(LOOP, "    #pragma GCC unroll 4\n" + LOOP)) == "other pragma"
    assert set(screen.KINDS) == {"no pragma", "reduction", "parallel, no reduction",
                                 "other pragma"}


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for argv, says in ((["/no/such/model"], "no model directory at /no/such/model"),
                       ([str(tmp_path), "--tasks", "dott"], "--tasks takes tasks"),
                       ([str(tmp_path), "--n", "0"], "--n is at least 1")):
        done = subprocess.run([sys.executable, str(BENCHMARKS / "forgetting_screen.py"), *argv],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [done.stderr.strip()]
        assert says in done.stderr and "Traceback" not in done.stderr
