"""The kernel memory: verified kernels in one SQLite file, keyed by task, kind, size, techniques
and measured rate, and retrieved by BM25 similarity of task and code.

Two rules hold here, where every kernel comes in and goes out:
- only a kernel whose stored Outcome says it passed (status OK, measured, not itself a copy)
  is admitted (`verified_or_why`); anything else is refused with the reason;
- a prompt for task T is never shown a kernel of T (at any size) or of a task with T's entry
  declaration, and a candidate for T whose fingerprint equals a kernel that could have been
  shown is a copy (`copy_of`): the search flags its Outcome and no reward or best counts it.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .. import sqlite_open
from ..checks.stages import detect_techniques
from ..paths import cache_dir
from .index import bm25, fingerprint, terms

SCHEMA = """
CREATE TABLE IF NOT EXISTS kernels (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task TEXT NOT NULL,
    kind TEXT NOT NULL,
    language TEXT NOT NULL,
    entry TEXT NOT NULL,           -- the task's entry declaration, whitespace-normalized
    size TEXT NOT NULL,            -- JSON {dim: value}, keys sorted
    code TEXT NOT NULL,
    fingerprint TEXT NOT NULL,     -- index.fingerprint(code)
    techniques TEXT NOT NULL,      -- JSON list
    gflops REAL,
    gbps REAL,                     -- the rate of a task that counts no FLOPs (data movement)
    fraction_of_peak REAL,
    speedup REAL,
    source TEXT NOT NULL,          -- run:DIR#ID, expert:TASK, pairs:FILE#LINE
    task_terms TEXT NOT NULL,      -- BM25 terms of the task (name, kind, description, entry)
    code_terms TEXT NOT NULL,      -- and of the code, space-separated
    outcome TEXT NOT NULL,         -- the Outcome JSON that verified it
    added REAL NOT NULL,
    UNIQUE (task, size, fingerprint)
);
CREATE INDEX IF NOT EXISTS kernels_fingerprint ON kernels(fingerprint);
"""

MEMORY_FILE = "memory.sqlite"
_FAMILIES = {"c": ("c", "cpp"), "cpp": ("c", "cpp")}
CODE_WEIGHT = 0.5  # the task says what is computed; the code, how (a parent's code is naive)
_INSERT = ("INSERT INTO kernels (task, kind, language, entry, size, code, fingerprint, techniques,"
           " gflops, gbps, fraction_of_peak, speedup, source, task_terms, code_terms, outcome,"
           " added)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def default_path() -> Path:
    return cache_dir() / MEMORY_FILE


class MemoryStoreError(ValueError):
    """A memory path that cannot hold a memory (a directory, a file that is not one)."""


@dataclass
class Kernel:
    id: int
    task: str
    kind: str
    language: str
    size: dict[str, int]
    code: str
    techniques: list[str]
    gflops: float | None
    gbps: float | None
    fraction_of_peak: float | None
    speedup: float | None
    source: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def task_terms(task) -> list[str]:
    """What a task is about, as search terms: its name, kind, description and entry."""
    return terms(" ".join([task.name, task.kind or "", task.description or "", task.entry]))


def _entry_key(task) -> str:
    return " ".join(task.entry.split())


def verified_or_why(outcome: dict[str, Any] | None, task_name: str) -> str | None:
    """None when `outcome` is a real evaluation that passed for `task_name`; else why not."""
    if not outcome:
        return "never evaluated"
    if outcome.get("status") != "OK":
        return f"status {outcome.get('status')}, not OK"
    if outcome.get("copied_from"):
        return "a copy of a memory kernel"
    if outcome.get("task") != task_name:
        return "its outcome is for another task"
    if not outcome.get("timing"):
        return "no measurement in its outcome"
    return None


class KernelMemory:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        if self.path.is_dir():
            raise MemoryStoreError(f"--memory {self.path} is a directory: give a file path "
                                   f"(e.g. {self.path / MEMORY_FILE})")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # the search's result callbacks may come from threads
        try:
            self.conn = sqlite_open.connect(self.path, SCHEMA, isolation_level=None,
                                            check_same_thread=False)
        except sqlite3.DatabaseError as exc:
            raise MemoryStoreError(f"{self.path} is not a kernel memory ({exc}): move it aside "
                                   "or give another --memory path") from None

    def _rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._lock:
            return self.conn.execute(sql, params).fetchall()

    # -- adding ----------------------------------------------------------------------------
    def add(self, task, code: str, outcome: dict[str, Any] | None, source: str) -> str:
        """Admit one verified kernel. Returns "added", "faster" (replaced the same kernel's
        slower record), "duplicate", or "refused: <why>" (nothing stored)."""
        why = verified_or_why(outcome, task.name)
        if why:
            return f"refused: {why}"
        size = json.dumps(outcome.get("sizes") or {}, sort_keys=True)
        fp = fingerprint(code)
        techniques = sorted(set(outcome.get("techniques") or []) | set(detect_techniques(code)))
        row = (task.name, task.kind or "unknown", task.language, _entry_key(task), size, code,
               fp, json.dumps(techniques), outcome.get("gflops"), outcome.get("gbps"),
               outcome.get("fraction_of_peak"), outcome.get("speedup"), source,
               " ".join(task_terms(task)), " ".join(terms(code)), json.dumps(outcome),
               time.time())
        rate = outcome.get("gflops") or outcome.get("gbps") or 0.0
        with self._lock:  # one transaction: two processes adding the same kernel keep one
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                old = self.conn.execute(
                    "SELECT id, coalesce(gflops, gbps, 0) FROM kernels WHERE task = ? AND "
                    "size = ? AND fingerprint = ?", (task.name, size, fp)).fetchone()
                if old is None:
                    result = "added"
                elif rate > old[1]:  # the same kernel measured faster: keep the better figure
                    self.conn.execute("DELETE FROM kernels WHERE id = ?", (old[0],))
                    result = "faster"
                else:
                    result = "duplicate"
                if result != "duplicate":
                    self.conn.execute(_INSERT, row)
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        return result

    def add_all(self, items: Iterable[tuple[Any, str | None, dict | None, str]],
                refused: Counter | None = None) -> dict:
        """Add (task, code, outcome, source) items; counts of each result, refusals by reason
        (`refused`: those a source already turned away). An item whose code is None (no
        kernel in the answer) is refused as such."""
        refused = Counter(refused or {})
        counts: Counter = Counter(refused=sum(refused.values()))
        for task, code, outcome, source in items:
            result = self.add(task, code, outcome, source) if code is not None else \
                "refused: no kernel in the answer"
            if result.startswith("refused: "):
                refused[result.removeprefix("refused: ")] += 1
                result = "refused"
            counts[result] += 1
        return {"added": counts["added"], "faster": counts["faster"],
                "duplicate": counts["duplicate"], "refused": counts["refused"],
                "refused_why": dict(refused)}

    # -- retrieving ------------------------------------------------------------------------
    _KERNEL_COLS = ("id, task, kind, language, size, code, techniques, gflops, gbps,"
                    " fraction_of_peak, speedup, source")

    @staticmethod
    def _kernel(row: tuple) -> Kernel:
        (id_, task, kind, language, size, code, techniques, gflops, gbps, fop, speedup,
         source) = row
        return Kernel(id_, task, kind, language, json.loads(size), code, json.loads(techniques),
                      gflops, gbps, fop, speedup, source)

    def search(self, task_query: list[str] = (), code_query: list[str] = (), k: int = 5,
               exclude_task=None, distinct_tasks: bool = False, language: str | None = None
               ) -> list[tuple[Kernel, float]]:
        """The k kernels most similar to the query, with their similarity: BM25 of the task
        terms against each kernel's task, plus CODE_WEIGHT x BM25 of the code terms against
        its code (two fields, so a long kernel's length does not drown its task's match);
        ranked by similarity (to 2 decimals), then by measured GFLOP/s. `exclude_task`: a
        Task whose own kernels (and those of tasks with its entry declaration) are left out,
        as a prompt for it must; `distinct_tasks`: the best-ranked kernel of each task only."""
        sql = f"SELECT {self._KERNEL_COLS}, task_terms, code_terms FROM kernels"
        where, params = [], []
        if exclude_task is not None:
            where.append("task != ? AND entry != ?")
            params += [exclude_task.name, _entry_key(exclude_task)]
        if language:  # C and C++ kernels teach each other; PyTorch ones stand apart
            family = _FAMILIES.get(language, (language,))
            where.append(f"language IN ({', '.join('?' * len(family))})")
            params += list(family)
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self._rows(sql, tuple(params))
        if not rows or k <= 0:
            return []
        by_task = bm25(task_query, [r[-2].split() for r in rows]) if task_query else \
            [0.0] * len(rows)
        by_code = bm25(code_query, [r[-1].split() for r in rows]) if code_query else \
            [0.0] * len(rows)
        scores = [t + CODE_WEIGHT * c for t, c in zip(by_task, by_code)]
        ranked = sorted(zip(rows, scores), key=lambda rs: (
            -round(rs[1], 2), -(rs[0][7] or 0.0), -(rs[0][8] or 0.0), rs[0][0]))
        out: list[tuple[Kernel, float]] = []
        seen: set[str] = set()
        for row, score in ranked:
            if distinct_tasks:  # the first of each task in this order
                if row[1] in seen:
                    continue
                seen.add(row[1])
            out.append((self._kernel(row[:-2]), score))
            if len(out) == k:
                break
        return out

    def for_prompt(self, task, code: str | None = None, k: int = 3) -> list[Kernel]:
        """What a prompt for `task` may show: kernels of other tasks only, in the task's
        language, one per task, most similar to the task (and to `code`, the parent) first."""
        found = self.search(task_terms(task), terms(code) if code else [], k, exclude_task=task,
                            distinct_tasks=True, language=task.language)
        return [kern for kern, score in found if score > 0]

    def copy_of(self, task, code: str) -> str | None:
        """When `code` is, up to names, whitespace and comments, a kernel a prompt for `task`
        could have been shown: which one ("memory #ID: TASK at SIZE (SOURCE)"); else None."""
        rows = self._rows("SELECT id, task, size, source FROM kernels WHERE fingerprint = ? "
                          "AND task != ? AND entry != ? ORDER BY id LIMIT 1",
                          (fingerprint(code), task.name, _entry_key(task)))
        if not rows:
            return None
        id_, other, size, source = rows[0]
        return f"memory #{id_}: {other} at {size} ({source})"

    # -- counting --------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        rows = self._rows("SELECT task, kind, techniques, source, gflops FROM kernels")
        by_technique: Counter = Counter()
        for r in rows:
            by_technique.update(json.loads(r[2]) or ["none"])
        best: dict[str, float] = {}
        for task, _, _, _, gflops in rows:
            if gflops is not None and gflops > best.get(task, -1.0):
                best[task] = gflops
        return {"path": str(self.path), "kernels": len(rows),
                "by_task": dict(sorted(Counter(r[0] for r in rows).items())),
                "by_kind": dict(sorted(Counter(r[1] for r in rows).items())),
                "by_technique": dict(sorted(by_technique.items())),
                "by_source": dict(sorted(Counter(r[3].split(":", 1)[0] for r in rows).items())),
                "best_gflops": dict(sorted(best.items()))}

    def close(self) -> None:
        self.conn.close()
