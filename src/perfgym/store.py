"""The run store: one SQLite file per run directory with the run's config, every candidate
(completion, code, parent, stage, iteration, policy, prompt hash, outcome, reward) and events.

A candidate is written twice: `add_pending` when its completion exists, `complete` when its
outcome does. Each has a `slot`, a name the search derives from its plan (for example
"sqd:3:17:deepen:2": iteration 3, parent 17, op, child 2), unique in the run; a resumed search
recomputes the plan and finds which slots are done, which are pending (generated, not yet
evaluated) and which are missing. Nothing done is redone and nothing stored is lost.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from . import sqlite_open

SCHEMA = """
CREATE TABLE IF NOT EXISTS run (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    slot TEXT NOT NULL UNIQUE,
    iteration INTEGER NOT NULL,
    stage INTEGER,
    parent_id INTEGER REFERENCES candidates(id),
    op TEXT NOT NULL,
    policy TEXT NOT NULL,
    prompt_hash TEXT,
    completion TEXT NOT NULL,
    status TEXT,            -- NULL while pending
    reward REAL,
    gflops REAL,
    outcome TEXT,           -- Outcome JSON
    created REAL NOT NULL,
    evaluated REAL
);
CREATE INDEX IF NOT EXISTS candidates_iteration ON candidates(iteration);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
"""


@dataclass
class Candidate:
    id: int
    slot: str
    iteration: int
    stage: int | None
    parent_id: int | None
    op: str
    policy: str
    prompt_hash: str | None
    completion: str
    status: str | None
    reward: float | None
    gflops: float | None
    outcome: dict[str, Any] | None

    @property
    def pending(self) -> bool:
        return self.status is None

    @property
    def ok(self) -> bool:
        return self.status == "OK"

    @property
    def rate(self) -> float:
        """How fast it ran: GFLOP/s, or GB/s for a task that moves data and computes nothing
        (transpose). Every ranking of kernels uses it: by GFLOP/s alone every transpose tied
        and a search's result was its first kernel, the naive one."""
        return self.gflops or (self.outcome or {}).get("gbps") or 0.0

    @property
    def copied(self) -> bool:
        """Passed, but a copy of a kernel memory entry (Outcome.copied_from): not counted."""
        return bool(self.outcome and self.outcome.get("copied_from"))


class StoreError(ValueError):
    """A run directory that cannot hold or give back a run (a file, a corrupt database)."""


class RunStore:
    FILE = "run.sqlite"

    def __init__(self, run_dir: str | Path) -> None:
        self.dir = Path(run_dir)
        if self.dir.exists() and not self.dir.is_dir():
            raise StoreError(f"{self.dir} is a file, not a run directory: choose another")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / self.FILE
        # one connection shared by threads (the async reward function runs in a worker thread)
        self._lock = threading.RLock()
        try:
            self.conn = sqlite_open.connect(
                self.path, SCHEMA, isolation_level=None, check_same_thread=False,
                pragmas=("synchronous=FULL",))  # a completed write survives kill -9
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a readable run store ({exc}): move it aside "
                             "or choose another run directory") from None

    def _execute(self, sql: str, params: tuple = ()) -> "_Result":
        with self._lock:
            cur = self.conn.execute(sql, params)
            return _Result(cur.fetchall(), cur.lastrowid)

    @classmethod
    def exists(cls, run_dir: str | Path) -> bool:
        return (Path(run_dir) / cls.FILE).is_file()

    # -- run config ------------------------------------------------------------------------
    def set_config(self, config: dict[str, Any]) -> None:
        self._execute("INSERT OR REPLACE INTO run VALUES ('config', ?)",
                          (json.dumps(config, sort_keys=True),))

    def config(self) -> dict[str, Any] | None:
        return self.value("config")

    def set_value(self, key: str, value: Any) -> None:
        """Keep a JSON value of the run under `key` (e.g. a replay policy's cursor)."""
        self._execute("INSERT OR REPLACE INTO run VALUES (?, ?)",
                      (key, json.dumps(value, sort_keys=True)))

    def value(self, key: str) -> Any:
        row = self._execute("SELECT value FROM run WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Writes inside are stored together or not at all (a kill between them loses all)."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    # -- candidates ------------------------------------------------------------------------
    def add_pending(self, slot: str, iteration: int, stage: int | None, parent_id: int | None,
                    op: str, policy: str, prompt: str | None, completion: str) -> int:
        prompt_hash = hashlib.sha256(prompt.encode()).hexdigest()[:16] if prompt else None
        cur = self._execute(
            "INSERT INTO candidates (slot, iteration, stage, parent_id, op, policy, prompt_hash,"
            " completion, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (slot, iteration, stage, parent_id, op, policy, prompt_hash, completion, time.time()))
        return int(cur.lastrowid)

    def complete(self, candidate_id: int, outcome: dict[str, Any], reward: float) -> None:
        self._execute(
            "UPDATE candidates SET status = ?, reward = ?, gflops = ?, outcome = ?, evaluated = ?"
            " WHERE id = ?", (outcome["status"], reward, outcome.get("gflops"),
                              json.dumps(outcome), time.time(), candidate_id))

    def set_reward(self, candidate_id: int, reward: float) -> None:
        self._execute("UPDATE candidates SET reward = ? WHERE id = ?", (reward, candidate_id))

    def by_slot(self, slot: str) -> Candidate | None:
        row = self._execute(f"SELECT {_COLS} FROM candidates WHERE slot = ?",
                                (slot,)).fetchone()
        return _candidate(row) if row else None

    def get(self, candidate_id: int) -> Candidate:
        row = self._execute(f"SELECT {_COLS} FROM candidates WHERE id = ?",
                                (candidate_id,)).fetchone()
        if row is None:
            raise KeyError(candidate_id)
        return _candidate(row)

    def candidates(self, iteration: int | None = None) -> list[Candidate]:
        if iteration is None:
            rows = self._execute(f"SELECT {_COLS} FROM candidates ORDER BY id")
        else:
            rows = self._execute(f"SELECT {_COLS} FROM candidates WHERE iteration = ? "
                                     "ORDER BY id", (iteration,))
        return [_candidate(r) for r in rows]

    def best(self) -> Candidate | None:
        # a copy of a memory kernel (Outcome.copied_from) is not the search's own result; the
        # fastest by Candidate.rate
        row = self._execute(f"SELECT {_COLS} FROM candidates WHERE status = 'OK' AND "
                            "json_extract(outcome, '$.copied_from') IS NULL ORDER BY "
                            "COALESCE(gflops, json_extract(outcome, '$.gbps'), 0) DESC, id "
                            "LIMIT 1").fetchone()
        return _candidate(row) if row else None

    def lineage(self, candidate_id: int) -> list[Candidate]:
        """The candidate and its ancestors, oldest first."""
        chain = []
        current: int | None = candidate_id
        while current is not None:
            c = self.get(current)
            chain.append(c)
            current = c.parent_id
        return chain[::-1]

    # -- events ----------------------------------------------------------------------------
    def event(self, kind: str, **data: Any) -> None:
        self._execute("INSERT INTO events (ts, kind, data) VALUES (?, ?, ?)",
                          (time.time(), kind, json.dumps(data)))

    def events(self, kind: str | None = None) -> Iterator[tuple[float, str, dict[str, Any]]]:
        query = "SELECT ts, kind, data FROM events" + (" WHERE kind = ?" if kind else "")
        for ts, k, data in self._execute(query + " ORDER BY id", (kind,) if kind else ()):
            yield ts, k, json.loads(data)

    def done_iterations(self, kind: str = "iteration_done") -> set[int]:
        """Iterations (SQD iterations, refine turns) whose completion event is stored."""
        return {d["iteration"] for _, _, d in self.events(kind)}

    def close(self) -> None:
        self.conn.close()


class _Result:
    """Rows fetched while the lock was held, so no cursor outlives it."""

    def __init__(self, rows: list, lastrowid: int | None) -> None:
        self.rows, self.lastrowid = rows, lastrowid

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return self.rows

    def __iter__(self):
        return iter(self.rows)


_COLS = ("id, slot, iteration, stage, parent_id, op, policy, prompt_hash, completion, status, "
         "reward, gflops, outcome")


def _candidate(row: tuple) -> Candidate:
    *head, outcome = row
    return Candidate(*head, json.loads(outcome) if outcome else None)
