"""Content-addressed outcome cache: identical candidates are answered without re-running.

The key covers everything that can change a result: the normalized code (comments and
whitespace do not matter), the task spec and baseline, the size, the evaluation config, the
machine fingerprint and the evaluator itself (its rules, harness and pipeline sources), so a
verdict given under older rules is never served after they change. SQLite keeps it safe for
concurrent readers and writers. A timing other programs disturbed is never kept; a kept C timing
carries the conditions it was taken in (parent_check["load"]: CPU used, others' CPU, steal).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from functools import lru_cache
from pathlib import Path

from . import sqlite_open
from .config import EvalConfig
from .outcome import Outcome
from .paths import cache_dir
from .tasks import Task

# Fields of EvalConfig that do not change a result.
_NOT_IN_KEY = {"use_cache", "seed", "compile_timeout"}
# The parts of the package that decide a verdict.
_EVALUATOR = ("checks", "harness", "backends", "evaluate.py", "verify.py", "sandbox.py",
              "machine.py")  # (machine.py: the rate bound the implausibility guard uses)


@lru_cache(maxsize=1)
def evaluator_digest() -> str:
    root = Path(__file__).parent
    digest = hashlib.sha256()
    for part in _EVALUATOR:
        files = sorted((root / part).rglob("*")) if (root / part).is_dir() else [root / part]
        for f in files:
            if f.is_file() and f.suffix in (".py", ".c"):
                digest.update(f.relative_to(root).as_posix().encode() + f.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(task: Task, text: str, size: dict[str, int], config: EvalConfig,
              machine_id: str) -> str:
    """The key of one evaluation of `text` (a model's answer or a source file). The one place a
    key is made: the task's backend says what of the text counts (for C the extracted kernel,
    normalized; for Python the extracted code as it is)."""
    from .backends import backend_for
    cfg = {k: v for k, v in config.to_dict().items() if k not in _NOT_IN_KEY}
    text = backend_for(task).key_text(task, text)
    blob = json.dumps({"code": text, "task": task.name, "spec": task.spec_hash,
                       "size": size, "config": cfg, "machine": machine_id,
                       "evaluator": evaluator_digest()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


_SCHEMA = ("CREATE TABLE IF NOT EXISTS outcomes (key TEXT PRIMARY KEY, "
           "outcome TEXT NOT NULL, created REAL DEFAULT (unixepoch('subsec')));")


class OutcomeCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_dir() / "outcomes.sqlite"
        self._local = threading.local()
        self._conn()  # creates the table

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite_open.connect(self.path, _SCHEMA)
            self._local.conn = conn
        return conn

    def get(self, key: str, max_age: float | None = None) -> Outcome | None:
        """The outcome kept under `key`; with `max_age`, only one kept in the last `max_age`
        seconds (a baseline: the machine's speed drifts, and a candidate is compared with a
        baseline timed near it)."""
        row = self._conn().execute("SELECT outcome, created FROM outcomes WHERE key = ?",
                                   (key,)).fetchone()
        if row is None:
            return None
        if max_age is not None and (row[1] is None or time.time() - row[1] > max_age):
            return None  # (NULL: kept by a version whose default, unixepoch('subsec'), is
            # NULL below SQLite 3.42)
        outcome = Outcome.from_dict(json.loads(row[0]))
        outcome.cached = True
        return outcome

    def put(self, key: str, outcome: Outcome) -> None:
        """Keep `outcome` under `key`, unless other programs disturbed its timing: a timing
        taken under load would be served as this kernel's speed from then on."""
        if outcome.disturbed:
            return
        with self._conn() as conn:
            conn.execute("INSERT OR REPLACE INTO outcomes (key, outcome, created) "
                         "VALUES (?, ?, ?)", (key, json.dumps(outcome.to_dict()), time.time()))

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM outcomes").fetchone()[0]
