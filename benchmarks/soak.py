"""Soak and kill -9 figures for issue 14, re-measured in one run.

1. Soak: N evaluations with the cache off, cycling over every built-in CPU task's naive and
   expert kernel at its smallest size and every hostile candidate in tests/hostile/candidates,
   batched through `evaluate_many`. Leaks are measured before, after the first batch (lazy
   one-time resources are not leaks) and at the end: descriptors, threads, child processes,
   sandbox-uid processes, work directories, RSS, /dev/shm. Flaky verdicts: a (candidate, size)
   seen with more than one status. False failures: naive/expert kernels that were not OK.
2. Kills: a real `perfgym search` killed with SIGKILL (the driver alone, not its group) at
   generation, build, timed run and store write; what it left after 0.5 s, then `--resume`
   (which sweeps) and what was left after that, and whether the resumed run has as many
   candidates as a clean one.

Other programs on the machine (the test suite, benchmarks) also make work directories and run
sandboxed processes: leftovers are attributed by the driver pid stamped in a work directory's
name (and, for a process, in its working directory); machine-wide counts are printed too.

    python benchmarks/soak.py                      # 2000 evaluations, 8 kills
    python benchmarks/soak.py --n 60 --kills 2     # a quick check
    python benchmarks/soak.py --out                # benchmarks/results/soak.json, by machine
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from perfgym import EvalConfig, Status, get_task
from perfgym.executors import Request, evaluate_many
from perfgym.sandbox import UID_BASE, UID_SLOTS, work_root
from perfgym.tasks import builtin_names, parse_size
from results_by_machine import RESULTS, record

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_DIR = ROOT / "tests" / "hostile" / "candidates"
SOAK_CONFIG = EvalConfig(use_cache=False, compare_baseline=False, timeout=3.0,
                         max_time=0.05, min_samples=3, max_samples=5)
COMPILER_NAMES = {"gcc", "g++", "cc", "cc1", "cc1plus", "as", "collect2", "ld", "clang"}
PHASES = ["generation", "build", "timed run", "store write"]

# Sample completions for the replay policy, as in tests/search/conftest.py: one right, one wrong,
# one that does not compile, one OpenMP.
NAIVE = """void matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s%s;
        }
}"""
COMPLETIONS = [
    "Here is a tuned version.\n```c\n" + NAIVE % "" + "\n```",
    "```c\n" + NAIVE % " * 1.01" + "\n```",
    "```c\nvoid matmul_optimized(double *A, double *B, double *C, int M, int N, int K) {\n"
    "    for (int i = 0; i < M; i++) C[i] = A[i] +;\n}\n```",
    "```c\n" + NAIVE.replace("    for (int i", "    #pragma omp parallel for\n    for (int i", 1)
    % "" + "\n```",
]


# ---- what the machine holds: one function per measurement ----------------------------------

def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def os_threads() -> int:
    return int(proc_status("self")["Threads"])


def rss_mb() -> float:
    return int(proc_status("self")["VmRSS"].split()[0]) / 1024


def shm_entries() -> int:
    return len(os.listdir("/dev/shm"))


def proc_status(pid) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return {k: v.strip() for k, v in (line.split(":", 1) for line in f if ":" in line)}


def descendants(pid: int) -> list[int]:
    """Live (not zombie) descendants of `pid`, from one /proc scan."""
    children = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                st = proc_status(entry)
            except (OSError, ValueError):
                continue
            if not st.get("State", "").startswith(("Z", "X")):
                children[int(st["PPid"])].append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def sandbox_processes() -> list[dict]:
    """Live processes under a sandbox uid: pid, name and working directory (a work directory
    whose name carries its driver's pid)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            st = proc_status(entry)
        except (OSError, ValueError):
            continue  # gone
        uid = int(st["Uid"].split()[0])
        if not UID_BASE <= uid < UID_BASE + UID_SLOTS or st["State"].startswith(("Z", "X")):
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            cwd = ""
        found.append({"pid": int(entry), "name": st["Name"], "cwd": cwd})
    return found


def stamp_pid(path: str) -> int | None:
    """The driver pid in a work directory name perfgym-[...-]PID.START-RANDOM."""
    m = re.search(r"perfgym-(?:nvcc-|torch-[a-z]+-)?(\d+)\.\d+-", path)
    return int(m.group(1)) if m else None


def work_dirs() -> list[Path]:
    root = work_root()
    return sorted(root.glob("perfgym-*")) if root.exists() else []


def dirs_of(pids: set[int]) -> list[Path]:
    return [p for p in work_dirs() if p.is_dir() and stamp_pid(p.name) in pids]


def processes_of(pids: set[int]) -> list[dict]:
    return [p for p in sandbox_processes() if stamp_pid(p["cwd"]) in pids]


def du_mb(paths: list[Path]) -> float:
    total = 0
    for path in paths:
        for dirpath, _, files in os.walk(path):
            for name in files:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
    return total / 2**20


def snapshot() -> dict:
    me = os.getpid()
    return {"fds": open_fds(), "threads": os_threads(), "python_threads": threading.active_count(),
            "children": len(descendants(me)), "sandbox_procs_mine": len(processes_of({me})),
            "sandbox_procs_all": len(sandbox_processes()), "workdirs_mine": len(dirs_of({me})),
            "workdirs_all": len(work_dirs()), "rss_mb": round(rss_mb(), 1),
            "dev_shm": shm_entries()}


# ---- 1. the soak ------------------------------------------------------------------------------

def hostile_expectation(path: Path) -> tuple[str, dict[str, str]]:
    m = re.match(r"// expect: (\w+)(.*)", path.read_text().splitlines()[0])
    return m.group(1), dict(kv.split("=", 1) for kv in m.group(2).split())


def soak_items() -> list[dict]:
    """One cycle: every built-in task's naive and expert kernel at its smallest size, then every
    hostile candidate with the task, size and config tests/hostile/test_hostile.py gives it."""
    items = []
    for name in builtin_names():
        task = get_task(name)
        size = task.sizes("smallest")[0]
        for kind, path in (("naive", task.baseline), ("expert", task.expert)):
            if path is not None:
                items.append({"label": f"{name}/{kind}", "honest": True, "expect": "OK",
                              "request": Request(task, path.read_text(), size, SOAK_CONFIG)})
    dgemm = get_task("dgemm")
    for path in sorted(HOSTILE_DIR.glob("*.c")):
        expect, options = hostile_expectation(path)
        config = SOAK_CONFIG.replace(verify=options.get("verify"),
                                     march=options.get("march", "native"),
                                     stage=int(options["stage"]) if "stage" in options else None)
        size = parse_size(options["size"], dgemm) if "size" in options else None
        items.append({"label": f"hostile/{path.stem}", "honest": False, "expect": expect,
                      "request": Request(dgemm, path.read_text(), size, config)})
    return items


def soak(n: int, batch: int) -> dict:
    items = soak_items()
    plan = [items[i % len(items)] for i in range(n)]
    seen: dict[tuple, set[str]] = defaultdict(set)
    false_failures, wrong_verdicts = [], []
    done = 0
    started = time.monotonic()

    def on_result(_: int, __) -> None:
        nonlocal done
        done += 1
        if done % 100 == 0:
            print(f"  soak {done}/{n}  {time.monotonic() - started:.0f} s  "
                  f"fds {open_fds()} threads {os_threads()} rss {rss_mb():.0f} MB", flush=True)

    before = snapshot()
    warm = None
    for start in range(0, n, batch):
        chunk = plan[start:start + batch]
        outcomes = evaluate_many([it["request"] for it in chunk], on_result=on_result)
        for it, outcome in zip(chunk, outcomes):
            size = tuple(sorted(outcome.sizes.items()))
            seen[(it["label"], size)].add(outcome.status.value)
            if it["honest"] and outcome.status is not Status.OK:
                false_failures.append(f"{it['label']} {outcome.status.value}: {outcome.message}")
            elif not it["honest"] and outcome.status.value != it["expect"]:
                wrong_verdicts.append(f"{it['label']} {outcome.status.value} "
                                      f"(expected {it['expect']}): {outcome.message}")
        if warm is None:
            warm = snapshot()
    time.sleep(0.5)  # let the last commands' exits be reaped
    after = snapshot()
    flaky = {f"{label} {dict(size)}": sorted(statuses)
             for (label, size), statuses in seen.items() if len(statuses) > 1}
    return {"evaluations": n, "cycle": len(items), "seconds": round(time.monotonic() - started, 1),
            "before": before, "after_first_batch": warm or before, "after": after,
            "distinct": len(seen), "flaky": flaky, "false_failures": false_failures,
            "wrong_hostile_verdicts": wrong_verdicts}


# ---- 2. kill -9 of a search --------------------------------------------------------------------

def search_argv(replay: Path, run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "perfgym.cli", "search", "--task", "dgemm", "--algo", "sqd",
            "--policy", "replay", "--replay", str(replay), "--iterations", "2", "--G", "4",
            "--run-dir", str(run_dir), *extra]


def completed_candidates(run_dir: Path) -> int:
    db = run_dir / "run.sqlite"
    if not db.exists():
        return 0
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT COUNT(*) FROM candidates WHERE status IS NOT NULL").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def clean_run(replay: Path, scratch: Path) -> dict:
    """An uninterrupted search: how many candidates a complete run has."""
    run_dir, env = scratch / "clean" / "run", search_env(scratch / "clean")
    started = time.monotonic()
    r = subprocess.run(search_argv(replay, run_dir), env=env, capture_output=True, text=True)
    return {"exit": r.returncode, "candidates": completed_candidates(run_dir),
            "seconds": round(time.monotonic() - started, 1), "stderr": r.stderr[-300:]}


def search_env(where: Path) -> dict[str, str]:
    # a cache of its own per run: no cached outcome skips a build or a timed run
    return {**os.environ, "PERFGYM_CACHE_DIR": str(where / "cache")}


def phase_of(names: set[str]) -> str:
    """What the driver was doing, from the names of its sandboxed processes: the build runs the
    compiler under `sh -c`, the harness binary is `run`."""
    if names & COMPILER_NAMES or "sh" in names:
        return "build"
    if "run" in names:
        return "timed run"
    return "driver only" if not names else "sandboxed " + ",".join(sorted(names))


def wait_for_phase(phase: str, proc: subprocess.Popen, run_dir: Path, deadline: float,
                   family: set[int]) -> str | None:
    """Poll until `proc` is in `phase`; what it was seen doing then (by its sandboxed
    processes), or None when it ended or the deadline passed first. `family` collects the
    driver's descendants (their pids stamp work directories too)."""
    wal = run_dir / "run.sqlite-wal"
    wal_mtime, seen_run = None, False
    while proc.poll() is None and time.monotonic() < deadline:
        if phase == "store write" and seen_run:  # no /proc scans now: kill as soon as it writes
            now = "timed run"  # seen before; what runs now is not looked at
        else:
            family.update(descendants(proc.pid))
            now = phase_of({p["name"] for p in processes_of(family)})
        if phase == "generation":
            if (run_dir / "run.sqlite").exists():  # the store is open: prompts are being answered
                return now
        elif phase in ("build", "timed run") and now == phase:
            return now
        elif phase == "store write":  # the first write to the store after a timed run
            seen_run = seen_run or now == "timed run"
            try:
                mtime = wal.stat().st_mtime_ns
            except OSError:
                mtime = None
            if seen_run and wal_mtime is not None and mtime != wal_mtime:
                return "WAL written"
            wal_mtime = mtime
            time.sleep(0.001)
            continue
        time.sleep(0.01)
    return None


def kill_at(phase: str, replay: Path, scratch: Path, clean_candidates: int) -> dict:
    run_dir, env = scratch / "run", search_env(scratch)
    proc = subprocess.Popen(search_argv(replay, run_dir), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    family = {proc.pid}
    seen = wait_for_phase(phase, proc, run_dir, time.monotonic() + 300, family)
    proc.send_signal(signal.SIGKILL)  # the driver alone, as `kill -9 PID` does (if still alive)
    observed = seen or "missed (run ended first)"
    proc.wait()
    result = {"phase": phase, "observed": observed,
              "candidates_at_kill": completed_candidates(run_dir)}
    time.sleep(0.5)
    left = dirs_of(family)
    result.update(procs_after_kill=[f"{p['pid']}:{p['name']}" for p in processes_of(family)],
                  workdirs_after_kill=len(left), workdirs_mb=round(du_mb(left), 2))

    resume = subprocess.Popen(search_argv(replay, run_dir, "--resume"), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    _, stderr = resume.communicate()
    everyone = family | {resume.pid}
    time.sleep(0.5)
    result.update(resume_exit=resume.returncode,
                  procs_after_resume=len(processes_of(everyone)),
                  workdirs_after_resume=len(dirs_of(everyone)),
                  candidates_after_resume=completed_candidates(run_dir))
    result["complete"] = (resume.returncode == 0
                          and result["candidates_after_resume"] == clean_candidates)
    if resume.returncode != 0:
        result["resume_stderr"] = stderr.strip().splitlines()[-1:] if stderr.strip() else []
    return result


def kills(k: int, phases: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="soak-kills-") as tmp:
        scratch = Path(tmp)
        replay = scratch / "replay.jsonl"
        replay.write_text("".join(json.dumps({"completion": c}) + "\n" for c in COMPLETIONS))
        clean = clean_run(replay, scratch)
        print(f"  clean run: exit {clean['exit']}, {clean['candidates']} candidates, "
              f"{clean['seconds']} s", flush=True)
        results = []
        for i in range(k):
            phase = phases[i % len(phases)]
            r = kill_at(phase, replay, scratch / f"kill{i}", clean["candidates"])
            print(f"  kill {i + 1}/{k} at {phase}: hit {r['observed']}, left "
                  f"{len(r['procs_after_kill'])} procs / {r['workdirs_after_kill']} dirs; "
                  f"after --resume {r['procs_after_resume']} / {r['workdirs_after_resume']}, "
                  f"{r['candidates_after_resume']} candidates", flush=True)
            results.append(r)
        return {"clean": clean, "kills": results}


# ---- summary ------------------------------------------------------------------------------------

def print_summary(s: dict | None, k: dict | None) -> None:
    if s:
        print(f"\nSoak: {s['evaluations']} evaluations ({s['cycle']} per cycle, "
              f"{s['distinct']} distinct candidate/size), {s['seconds']} s, cache off")
        print(f"  {'':22}{'before':>10}{'1st batch':>11}{'after':>10}{'leak':>8}")
        for key in s["before"]:
            b, w, a = s["before"][key], s["after_first_batch"][key], s["after"][key]
            leak = round(a - w, 1)
            print(f"  {key:22}{b:>10}{w:>11}{a:>10}{leak:>8}")
        print(f"  flaky verdicts: {len(s['flaky'])}"
              + "".join(f"\n    {k_}: {v}" for k_, v in s["flaky"].items()))
        print(f"  false failures (naive/expert not OK): {len(s['false_failures'])}"
              + "".join(f"\n    {f}" for f in s["false_failures"][:10]))
        print(f"  hostile verdicts other than expected: {len(s['wrong_hostile_verdicts'])}"
              + "".join(f"\n    {f}" for f in s["wrong_hostile_verdicts"][:10]))
    if k:
        print(f"\nKills (clean run: {k['clean']['candidates']} candidates, "
              f"{k['clean']['seconds']} s)")
        print(f"  {'phase':12}{'seen at the kill':24}{'done':>5}{'procs':>7}{'dirs':>6}{'MB':>7}"
              f"{'procs':>7}{'dirs':>6}{'resumed':>9}{'cands':>7}")
        print(f"  {'':12}{'':24}{'':>5}{'-- after kill --':>20}{'-- after --resume --':>29}")
        for r in k["kills"]:
            print(f"  {r['phase']:12}{r['observed'][:23]:24}{r['candidates_at_kill']:>5}"
                  f"{len(r['procs_after_kill']):>7}{r['workdirs_after_kill']:>6}"
                  f"{r['workdirs_mb']:>7}{r['procs_after_resume']:>7}"
                  f"{r['workdirs_after_resume']:>6}{'yes' if r['complete'] else 'NO':>9}"
                  f"{r['candidates_after_resume']:>7}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="soak evaluations (0: no soak)")
    parser.add_argument("--batch", type=int, default=20, help="requests per evaluate_many")
    parser.add_argument("--kills", type=int, default=8, help="kill -9 runs (0: none)")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help="kill phases, cycled over the kills (default: %(default)s)")
    parser.add_argument("--out", type=Path, nargs="?", const=RESULTS / "soak.json",
                        help="add this machine kind's entry to OUT "
                        "(default: benchmarks/results/soak.json)")
    args = parser.parse_args()
    if args.n < 0 or args.kills < 0 or args.batch < 1:
        parser.error("--n and --kills must be >= 0, --batch >= 1")
    phases = [p.strip() for p in args.phases.split(",")]
    if unknown := [p for p in phases if p not in PHASES]:
        parser.error(f"unknown phase {unknown[0]!r}: use some of {', '.join(PHASES)}")

    print(f"soak: {args.n} evaluations, batches of {args.batch}", flush=True)
    s = soak(args.n, args.batch) if args.n else None
    print(f"kills: {args.kills}", flush=True)
    k = kills(args.kills, phases) if args.kills else None
    print_summary(s, k)
    if args.out:
        result = {"soak": s, "kills": k}
        record("soak", result, summary(result), args.out)


def summary(result: dict) -> dict:
    """The headline figures of a run, for the docs' table of machine kinds."""
    out = {}
    if s := result["soak"]:
        out["evaluations"] = f"{s['evaluations']} in {s['seconds']:.0f} s"
        out["flaky / false failures / wrong hostile verdicts"] = (
            f"{len(s['flaky'])} / {len(s['false_failures'])} / {len(s['wrong_hostile_verdicts'])}")
        out["RSS after the first batch / at the end"] = (
            f"{s['after_first_batch']['rss_mb']:.0f} / {s['after']['rss_mb']:.0f} MB")
    if k := result["kills"]:
        out["kills: resumed complete"] = (
            f"{sum(r['complete'] for r in k['kills'])} of {len(k['kills'])}")
        out["kills: processes left"] = str(sum(len(r["procs_after_kill"]) for r in k["kills"]))
    return out


if __name__ == "__main__":
    main()
