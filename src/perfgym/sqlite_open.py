"""Opening perfgym's SQLite files (outcome cache, run store, kernel memory) safely on first use.

Creating a database and switching it to WAL takes a lock that SQLite's busy timeout does not
always wait for: two threads or processes opening a missing file at once could get "database is
locked" (a first `perfgym eval` on a task with two candidates did, 3 times in 6). So the first
steps (connect, WAL, schema) run one at a time under an flock on a file beside the database,
which serializes threads and processes alike; after that, SQLite's own locking suffices.
"""
from __future__ import annotations

import fcntl
import sqlite3
from pathlib import Path


def connect(path: str | Path, schema: str = "", *, pragmas: tuple[str, ...] = (),
            **kwargs) -> sqlite3.Connection:
    """A connection to `path` in WAL mode with `schema` applied (CREATE ... IF NOT EXISTS);
    `pragmas` run on every connection (e.g. "synchronous=FULL"); `kwargs` go to
    sqlite3.connect."""
    path = Path(path)
    kwargs.setdefault("timeout", 30)
    lock_path = path.with_name(path.name + ".lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        conn = sqlite3.connect(path, **kwargs)
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            for pragma in pragmas:
                conn.execute(f"PRAGMA {pragma}")
            if schema:
                conn.executescript(schema)
        except BaseException:
            conn.close()
            raise
    return conn
