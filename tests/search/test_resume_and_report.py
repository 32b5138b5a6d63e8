"""kill -9 in the middle of a search, then --resume: nothing lost, nothing evaluated twice;
then the report."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time


def search(run_dir, replay_file, *extra):
    return [sys.executable, "-m", "perfgym.cli", "search", "--task", "dgemm", "--algo", "sqd",
            "--policy", "replay", "--replay", str(replay_file), "--iterations", "2", "--G", "4",
            "--run-dir", str(run_dir), "--json", *extra]


def completed(db):
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT id, slot, evaluated FROM candidates WHERE status IS NOT NULL "
                            "ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def test_kill_and_resume(tmp_path, replay_file):
    run_dir = tmp_path / "run"
    db = run_dir / "run.sqlite"
    env = {**os.environ, "PERFGYM_CACHE_DIR": str(tmp_path / "cache")}  # no cache hits
    proc = subprocess.Popen(search(run_dir, replay_file), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while len(completed(db)) < 6 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = completed(db)
    assert 0 < len(before) < 29, "the kill should land mid-search"

    r = subprocess.run(search(run_dir, replay_file, "--resume"), env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    after = completed(db)
    assert len(after) == 29 and len({slot for _, slot, _ in after}) == 29
    # every candidate evaluated before the kill kept its outcome (same evaluation time)
    assert set(before) <= set(after)
    assert json.loads(r.stdout)["best"]["status"] == "OK"

    # a second --resume finds everything done
    again = subprocess.run(search(run_dir, replay_file, "--resume"), env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and completed(db) == after

    # and without --resume the run directory is protected
    clash = subprocess.run(search(run_dir, replay_file), env=env, capture_output=True, text=True)
    assert clash.returncode == 2 and "--resume" in clash.stderr

    rep = subprocess.run([sys.executable, "-m", "perfgym.cli", "report", str(run_dir)],
                         capture_output=True, text=True, env=env)
    assert rep.returncode == 0, rep.stderr
    report = run_dir / "report"
    for name in ("progress.png", "status_by_stage.png", "best_lineage.png"):
        assert (report / name).stat().st_size > 5000
    summary = (report / "summary.md").read_text()
    assert "pass@k" in summary and "```c" in summary and "Lineage" in summary
