"""`perfgym pairs from-runs` on a real search run: the replay policy hands SQD real kernels, the
gym evaluates every one, and only verified children faster than their verified parent become
pairs; held-out tasks never do; a rerun writes the same bytes."""
import json
import subprocess
import sys

import pytest

from perfgym.extract import normalize
from perfgym.tasks import get_task
from perfgym.train.pairs import VARIANTS_DIR, read_pairs

NAIVE = get_task("dgemm").baseline.read_text()
IKJ = (VARIANTS_DIR / "dgemm__ikj_loop_order.c").read_text()
OMP_IKJ = (VARIANTS_DIR / "dgemm__openmp_ikj.c").read_text()
WRONG = NAIVE.replace("C[i * N + j] = sum;", "C[i * N + j] = sum * 1.01;")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "perfgym.cli", *args], capture_output=True,
                          text=True, timeout=1200)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """SQD at stage 6, two iterations of two children: the seed's children are ikj (faster)
    and a wrong kernel, then a naive copy and OpenMP ikj; ikj's own children copy it (not
    faster than their parent) or are wrong; the wrong kernel's repairs have no verified
    parent."""
    root = tmp_path_factory.mktemp("from-runs")
    answers = [IKJ, WRONG, NAIVE, OMP_IKJ]
    replay = root / "answers.jsonl"
    replay.write_text("".join(json.dumps({"completion": f"```c\n{a}\n```"}) + "\n"
                              for a in answers))
    done = cli("search", "--task", "dgemm", "--policy", "replay", "--replay", str(replay),
               "--algo", "sqd", "--stages", "6", "--iterations", "2", "--G", "2",
               "--no-heldout", "--run-dir", str(root / "dgemm-run"), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    return root


def test_only_verified_faster_children_become_pairs(run):
    out = run / "pairs.jsonl"
    done = cli("pairs", "from-runs", str(run / "dgemm-run"), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    pairs = read_pairs(out)
    fast = {normalize(p.fast) for p in pairs}
    assert normalize(IKJ) in fast and normalize(OMP_IKJ) in fast
    assert normalize(WRONG) not in fast and normalize(NAIVE) not in fast
    for p in pairs:
        assert p.task == "dgemm" and p.speedup >= 1.1
        assert normalize(p.slow) != normalize(WRONG)  # a parent that failed gives no pair
        assert normalize(p.slow) != normalize(p.fast)
    assert json.loads(done.stdout)["pairs"] == len(pairs)


def test_held_out_tasks_are_excluded(run):
    out = run / "excluded.jsonl"
    done = cli("pairs", "from-runs", str(run / "dgemm-run"), "--out", str(out),
               "--exclude", "spmv,dgemm", "--json")
    assert done.returncode == 0, done.stderr
    assert read_pairs(out) == [] and json.loads(done.stdout)["excluded"] == ["spmv", "dgemm"]


def test_a_rerun_writes_the_same_file(run):
    first, second = run / "first.jsonl", run / "second.jsonl"
    for out in (first, second):
        assert cli("pairs", "from-runs", str(run / "dgemm-run"), "--out", str(out)).returncode == 0
    assert first.read_bytes() == second.read_bytes() and first.read_bytes()


def test_append_keeps_the_held_pairs_and_adds_only_new_ones(run, tmp_path):
    """A committed pairs file outlives the run stores it came from (a new machine has none):
    --append keeps it, adds the run's pairs it does not hold (a reformatted copy is held),
    gives a clashing id a suffix, and drops a held pair of a task now excluded."""
    import dataclasses

    from perfgym.train.pairs import Pair, write_pairs
    fresh = tmp_path / "fresh.jsonl"
    assert cli("pairs", "from-runs", str(run / "dgemm-run"), "--out", str(fresh)).returncode == 0
    found = read_pairs(fresh)
    assert len(found) >= 2
    held_copy = dataclasses.replace(found[0], fast="/* reformatted */\n" + found[0].fast)
    clash = Pair("x", found[1].file_id, "another machine's run of the same name",
                 "void f(void) {}", "void f(void) { }", task="dot")
    gone = Pair("x", "histogram/old#1", "a held-out task's pair", "int a;", "int b;",
                task="histogram")
    out = tmp_path / "committed.jsonl"
    write_pairs(out, [held_copy, clash, gone])
    done = cli("pairs", "from-runs", str(run / "dgemm-run"), "--out", str(out), "--append",
               "--exclude", "histogram", "--json")
    assert done.returncode == 0, done.stderr
    merged = read_pairs(out)
    assert merged[:2] == [held_copy, clash] and gone not in merged
    added = merged[2:]
    assert len(added) == len(found) - 1 == json.loads(done.stdout)["added"]
    assert [normalize(p.fast) for p in added] == [normalize(p.fast) for p in found[1:]]
    assert len({p.file_id for p in merged}) == len(merged)
    assert added[0].file_id == found[1].file_id + "~2"
    again = cli("pairs", "from-runs", str(run / "dgemm-run"), "--out", str(out), "--append")
    assert again.returncode == 0 and read_pairs(out) == merged  # nothing new the second time


def test_bad_input_is_one_line_and_exit_2(run, tmp_path):
    for args in ([str(tmp_path / "missing")], [str(tmp_path)],
                 [str(run / "dgemm-run"), "--min-speedup", "0.5"]):
        done = cli("pairs", "from-runs", *args, "--out", str(tmp_path / "x.jsonl"))
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def _copy_run(run, tmp_path):
    import shutil
    import sqlite3
    copy = tmp_path / "copied-run"
    shutil.copytree(run / "dgemm-run", copy)
    return copy, sqlite3.connect(copy / "run.sqlite")


def test_from_naive_pairs_a_grandchild_with_the_naive_kernel(run, tmp_path):
    copy, db = _copy_run(run, tmp_path)
    ids: dict[str, int] = {}  # each kernel's first candidate
    for cid, text in db.execute("SELECT id, completion FROM candidates WHERE status = 'OK' "
                                "ORDER BY id"):
        ids.setdefault(normalize(text.split("```c\n", 1)[-1].rsplit("```", 1)[0]), cid)
    # OpenMP ikj's first answer as ikj's child (the run made it the seed's): every OpenMP ikj
    # is then a grandchild of the seed
    db.execute("UPDATE candidates SET parent_id = ? WHERE id = ?",
               (ids[normalize(IKJ)], ids[normalize(OMP_IKJ)]))
    db.commit()
    db.close()
    plain, wide = tmp_path / "plain.jsonl", tmp_path / "wide.jsonl"
    assert cli("pairs", "from-runs", str(copy), "--out", str(plain)).returncode == 0
    done = cli("pairs", "from-runs", str(copy), "--out", str(wide), "--from-naive")
    assert done.returncode == 0, done.stderr
    by_slow = lambda path: {(normalize(p.slow), normalize(p.fast)) for p in read_pairs(path)}
    grandchild = (normalize(NAIVE), normalize(OMP_IKJ))
    assert grandchild not in by_slow(plain) and grandchild in by_slow(wide)
    assert by_slow(plain) < by_slow(wide)
    assert all(normalize(p.fast) != normalize(WRONG) for p in read_pairs(wide))


def test_a_disturbed_timing_gives_no_pair(run, tmp_path):
    copy, db = _copy_run(run, tmp_path)
    rows = db.execute("SELECT id, outcome FROM candidates WHERE status = 'OK'").fetchall()
    for cid, text in rows:  # every verified kernel's timing, as other programs disturbed it
        outcome = json.loads(text)
        outcome["disturbed"] = "load 3.0 in every run"
        db.execute("UPDATE candidates SET outcome = ? WHERE id = ?", (json.dumps(outcome), cid))
    db.commit()
    db.close()
    out = tmp_path / "pairs.jsonl"
    done = cli("pairs", "from-runs", str(copy), "--out", str(out), "--from-naive", "--json")
    assert done.returncode == 0, done.stderr
    assert rows and json.loads(done.stdout)["pairs"] == 0


def test_a_copy_of_the_naive_kernel_timed_fast_gives_no_pair(run, tmp_path):
    copy, db = _copy_run(run, tmp_path)
    rows = db.execute("SELECT id, outcome FROM candidates WHERE status = 'OK' AND op != 'seed'"
                      " AND completion LIKE '%sum += A[i * K + k] * B[k * N + j]%'").fetchall()
    for cid, text in rows:  # the naive kernel handed back, its timing 1.5x on noise
        outcome = {**json.loads(text), "speedup": 1.5, "speedup_low": None, "flags": []}
        db.execute("UPDATE candidates SET outcome = ? WHERE id = ?", (json.dumps(outcome), cid))
    db.commit()
    db.close()
    out = tmp_path / "pairs.jsonl"
    assert cli("pairs", "from-runs", str(copy), "--out", str(out), "--from-naive").returncode == 0
    assert rows and all(normalize(p.fast) != normalize(NAIVE) for p in read_pairs(out))
