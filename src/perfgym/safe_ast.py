"""`ast.parse` safe under threads, for every Python perfgym runs on.

CPython 3.11 before 3.11.8 and 3.12 before 3.12.2 keep the AST constructor's recursion depth in
one interpreter-wide counter (gh-106905). When a garbage collection during a parse runs a
finalizer that lets another thread in, and that thread parses too, the counter is off when the
first parse ends, and it raises `SystemError: AST constructor recursion depth mismatch
(before=42, after=40)` for valid source. perfgym parses size formulas, references and
candidates' Python in threaded evaluations, so every parse of perfgym's goes through the one
lock here (a parse of a formula takes microseconds, of a candidate's module a millisecond).
Parsing to a tree is the affected step (and compiling a tree, which perfgym does not do);
`compile()` of source text to code, `ast.walk` and `ast.unparse` are not.
"""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """ast.parse, one at a time across the process's threads."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
