"""perfgym's SQLite files are safe on first use: many threads and processes opening a missing
database at once (the outcome cache, the run store, the kernel memory) all get a working
connection, never "database is locked". The first loop's `perfgym eval --task relu` failed this
way on one of its two candidates in 3 of 6 tries."""
import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest

from perfgym import sqlite_open
from perfgym.cache import OutcomeCache
from perfgym.memory.store import KernelMemory
from perfgym.store import RunStore

THREADS = 4
PROCESSES = 2
ATTEMPTS = 40  # the old code failed in about 1 attempt in 20 with 4 threads


def open_outcome_cache(d: Path) -> None:
    cache = OutcomeCache(d / "outcomes.sqlite")
    assert cache.get("no such key") is None and len(cache) >= 0


def open_run_store(d: Path) -> None:
    store = RunStore(d / "run")
    store.conn.execute("SELECT COUNT(*) FROM candidates").fetchone()


def open_memory(d: Path) -> None:
    memory = KernelMemory(d / "memory.sqlite")
    memory.conn.execute("SELECT 1").fetchone()


OPENERS = {"outcome cache": open_outcome_cache, "run store": open_run_store,
           "kernel memory": open_memory}


def _in_process(name: str, d: str, barrier, errors) -> None:
    try:
        barrier.wait()
        OPENERS[name](Path(d))
    except Exception as exc:  # reported to the parent, which fails the test
        errors.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("name", sorted(OPENERS))
def test_many_threads_and_processes_create_one_database_at_once(name, tmp_path):
    for attempt in range(ATTEMPTS):  # a race needs many chances to show
        d = tmp_path / str(attempt)
        d.mkdir()
        ctx = multiprocessing.get_context("fork")
        barrier, errors = ctx.Barrier(THREADS + PROCESSES), ctx.Queue()
        procs = [ctx.Process(target=_in_process, args=(name, str(d), barrier, errors))
                 for _ in range(PROCESSES)]
        threads = [threading.Thread(target=_in_process, args=(name, str(d), barrier, errors))
                   for _ in range(THREADS)]
        for w in procs + threads:
            w.start()
        for w in procs + threads:
            w.join(timeout=120)
        assert all(p.exitcode == 0 for p in procs)
        found = []
        while not errors.empty():
            found.append(errors.get())
        assert not found, found


def test_the_opened_database_is_in_wal_mode_with_its_schema(tmp_path):
    conn = sqlite_open.connect(tmp_path / "x.sqlite", "CREATE TABLE IF NOT EXISTS t (a);",
                               pragmas=("synchronous=FULL",))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    conn.execute("INSERT INTO t VALUES (1)")


def test_a_file_that_is_not_a_database_is_an_error_not_a_hang(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(sqlite3.DatabaseError):
        sqlite_open.connect(bad, "CREATE TABLE IF NOT EXISTS t (a);")
