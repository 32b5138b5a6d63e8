"""benchmarks/learning_lever.py: two learning runs' reports compared, paired by task and seed
(the records are made here; no model, no kernel timed)."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
spec = importlib.util.spec_from_file_location("learning_lever", BENCHMARKS / "learning_lever.py")
lever = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lever)

TASKS = ("dgemm", "dot", "spmv", "trsm")


def report(faster_of, seeds=(1, 2, 3), arm="control", split="train", n=10, copies=0) -> dict:
    """A report whose (seed, task) cell has faster_of(seed, task) faster samples of n, every
    sample right, the first `copies` of each cell the naive kernel handed back."""
    rows = []
    for s in seeds:
        for t in TASKS:
            k = faster_of(s, t)
            rows += [{"arm": arm, "seed": s, "split": split, "task": t, "status": "OK",
                      "faster": i < k, "naive_copy": i < copies} for i in range(n)]
    return {"per_sample": rows}


def test_a_lever_that_helps_every_cell_has_an_interval_above_zero():
    before = report(lambda s, t: 2)
    after = report(lambda s, t: 6)
    m = lever.compare(before["per_sample"], after["per_sample"], reps=500)["control"]["train"]
    f = m["faster"]
    assert abs(f["before"] - 0.2) < 1e-9 and abs(f["after"] - 0.6) < 1e-9
    assert abs(f["diff"] - 0.4) < 1e-9 and 0 < f["diff_low"] <= f["diff"] <= f["diff_high"]
    assert f["cells"] == 12 and f["seeds"] == [1, 2, 3]
    assert m["correct"]["diff"] == 0 and m["correct_changed"]["before"] == 1.0


def test_a_lever_that_helps_one_task_only_is_not_called_a_gain():
    """Clustered by task: +8 of 10 on one task of four is a mean +20 points whose interval
    reaches zero, as three of four drawn tasks are unchanged as often as not."""
    before = report(lambda s, t: 1)
    after = report(lambda s, t: 9 if t == "dot" else 1)
    f = lever.compare(before["per_sample"], after["per_sample"], reps=2000)["control"]["train"]
    f = f["faster"]
    assert abs(f["diff"] - 0.2) < 1e-9
    assert f["diff_low"] <= 0.0 < f["diff_high"]


def test_only_shared_seeds_are_compared_and_copies_are_not_changed_answers():
    before = report(lambda s, t: 3, seeds=(1, 2))
    after = report(lambda s, t: 3, seeds=(1, 2, 3), copies=4)
    m = lever.compare(before["per_sample"], after["per_sample"], reps=200)["control"]["train"]
    assert m["faster"]["seeds"] == [1, 2] and m["faster"]["diff"] == 0
    assert abs(m["correct_changed"]["after"] - 0.6) < 1e-9
    assert abs(m["correct_changed"]["diff"] + 0.4) < 1e-9


def test_the_command_prints_writes_and_refuses_bad_input(tmp_path):
    a, b, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "cmp.json"
    a.write_text(json.dumps(report(lambda s, t: 2, arm="grpo")))
    b.write_text(json.dumps(report(lambda s, t: 5, arm="grpo")))
    run = [sys.executable, str(BENCHMARKS / "learning_lever.py")]
    r = subprocess.run([*run, str(a), str(b), "--json", str(out)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert "grpo" in r.stdout and "+30.0" in r.stdout
    assert json.loads(out.read_text())["comparison"]["grpo"]["train"]["faster"]["after"] == 0.5

    (tmp_path / "bad.json").write_text("{not json")
    r = subprocess.run([*run, str(tmp_path / "bad.json"), str(b)], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr and "not a learning_speed.py --json report" in r.stderr

    c = tmp_path / "c.json"
    c.write_text(json.dumps(report(lambda s, t: 5, arm="grpo", seeds=(7,))))
    r = subprocess.run([*run, str(a), str(c)], capture_output=True, text=True)
    assert r.returncode == 2 and "share no (seed, task) cell" in r.stderr
