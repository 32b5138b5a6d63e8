"""--resume with the replay policy continues the replay file where the run stopped: a search
killed mid-run and resumed stores exactly the completions, slot by slot, of a run that was never
interrupted (the cursor lives in the run store, written with each batch of completions)."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from perfgym.policies.replay import ReplayPolicy
from perfgym.store import RunStore

# Answers whose verdicts take no timing (so the search's choice of parents is the same in
# every run): no code, a compile error, a forbidden call; each line differs, so a cursor that
# restarts at the top of the file shows up in the stored completions.
BROKEN = ("```c\nvoid matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {\n"
          "    /* variant %d */\n    for (int i = 0; i < M; i++) C[i] = A[i] +;\n}\n```")
FORBIDDEN = ("```c\n#include <stdlib.h>\nvoid matmul_optimized(double *A, double *B, double *C, "
             "int M, int N, int K) {\n    /* variant %d */\n    system(\"true\");\n}\n```")
PROSE = "I would tile the loops (variant %d), but I will not write the code."


def replay_lines() -> list[str]:
    lines = []
    for i in range(5):  # 15 lines: more than one iteration (4 children) holds
        lines += [BROKEN % i, PROSE % i, FORBIDDEN % i]
    return lines


def search(run_dir, replay_file, *extra):
    return [sys.executable, "-m", "perfgym.cli", "search", "--task", "dgemm", "--algo", "sqd",
            "--policy", "replay", "--replay", str(replay_file), "--iterations", "3", "--G", "4",
            "--run-dir", str(run_dir), "--json", *extra]


def stored(db) -> list[tuple[str, str]]:
    """(slot, completion) of every stored candidate, in the order they were made."""
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT slot, completion FROM candidates ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def completed(db) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT COUNT(*) FROM candidates WHERE status IS NOT NULL").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


@pytest.fixture
def replay_file(tmp_path):
    path = tmp_path / "replay.jsonl"
    path.write_text("".join(json.dumps({"completion": c}) + "\n" for c in replay_lines()))
    return path


def test_killed_and_resumed_replay_gives_the_uninterrupted_candidates(tmp_path, replay_file):
    env = {**os.environ, "PERFGYM_CACHE_DIR": str(tmp_path / "cache")}
    whole = tmp_path / "whole"
    r = subprocess.run(search(whole, replay_file), env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    expected = stored(whole / "run.sqlite")
    generated = [c for slot, c in expected if slot != "sqd:0:seed"]
    assert len(generated) > 2 * len(replay_lines())  # three iterations of 8 to 16 children
    assert generated[len(replay_lines()):len(replay_lines()) + 3] == replay_lines()[:3], \
        "the run should wrap around the replay file"

    run_dir = tmp_path / "killed"
    db = run_dir / "run.sqlite"
    proc = subprocess.Popen(search(run_dir, replay_file), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while completed(db) < 8 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = stored(db)
    assert 0 < len(before) < len(expected), "the kill should land mid-search"
    assert before == expected[:len(before)]

    r = subprocess.run(search(run_dir, replay_file, "--resume"), env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert stored(db) == expected


def test_the_cursor_is_kept_in_the_run_store_with_the_completions(tmp_path, replay_file):
    store = RunStore(tmp_path / "run")
    policy = ReplayPolicy(replay_file)
    first = policy.generate(["a prompt"], 4)[0]
    with store.transaction():
        store.add_pending("s0", 1, None, None, "generate", "replay", "a prompt", first[0])
        store.set_value("policy_state:replay", policy.state())
    with pytest.raises(RuntimeError):  # a failure inside a transaction stores none of it
        with store.transaction():
            store.set_value("policy_state:replay", {"cursor": {"": 99}})
            raise RuntimeError("killed")
    store.close()

    reopened = RunStore(tmp_path / "run")
    resumed = ReplayPolicy(replay_file)
    resumed.restore(reopened.value("policy_state:replay"))
    assert resumed.generate(["a prompt"], 2)[0] == replay_lines()[4:6]
    assert [c.slot for c in reopened.candidates()] == ["s0"]
