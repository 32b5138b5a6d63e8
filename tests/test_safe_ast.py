"""perfgym's parses are safe under threads. CPython 3.11 before 3.11.8 (and 3.12 before
3.12.2) raises `SystemError: AST constructor recursion depth mismatch` when two threads parse
at once and a garbage collection in one lets the other in (gh-106905); the size formulas are
parsed during threaded evaluations, and one such error made an honest kernel HOST_ERROR."""
import ast
import re
import sys
import threading
import time
from pathlib import Path

import pytest

import perfgym
from perfgym import safe_ast
from perfgym.tasks.formula import evaluate_formula

THREADS, PARSES = 32, 200


class _Finalized:
    """Garbage whose finalizer runs inside a parse's garbage collection and lets other
    threads in (sleep releases the GIL): what turns the interpreter's race into an error on
    the affected Pythons."""

    def __del__(self):
        time.sleep(0)


def _litter():
    for _ in range(3):
        _Finalized()
    cycle = [_Finalized() for _ in range(5)]
    cycle.append(cycle)  # a cycle: only the collector frees it


def _hammer(job) -> list[str]:
    errors: list[str] = []
    barrier = threading.Barrier(THREADS)

    def run(i):
        barrier.wait()  # all at once
        try:
            for j in range(PARSES):
                _litter()
                job(i, j)
        except Exception as exc:  # noqa: BLE001 (every failure is the finding)
            errors.append(f"thread {i}: {exc!r}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


AFFECTED = (3, 11) <= sys.version_info < (3, 11, 8) or (3, 12) <= sys.version_info < (3, 12, 2)


@pytest.mark.skipif(not AFFECTED, reason="this Python has the fix of gh-106905")
def test_on_this_python_the_bare_parse_races_under_the_same_load():
    """The load below is enough to show the interpreter's race (the tests after it have
    teeth): ast.parse without the lock raises."""
    errors = _hammer(lambda i, j: ast.parse(f"{i}*M + {j}*N // (K + {i + 1})", mode="eval"))
    assert any("recursion depth mismatch" in e for e in errors), errors


def test_formulas_parsed_by_many_threads_at_once_neither_raise_nor_mix_up():
    wrong: list[str] = []

    def job(i, j):
        # distinct per thread and parse: each one a first parse, not a cached tree
        text = f"{i}*M + {j}*N*K - min(M, {j}) // (K + {i + 1}) + max(N, {i}) ** 2"
        names = {"M": 3 + i, "N": 5 + j, "K": 7}
        got = evaluate_formula(text, names)
        want = (i * names["M"] + j * names["N"] * 7 - min(names["M"], j) // (7 + i + 1)
                + max(names["N"], i) ** 2)
        if got != want:
            wrong.append(f"{text} = {got}, not {want}")
        # and a repeated one (the cached tree, shared by the threads)
        if evaluate_formula("2*M*N*K", {"M": i, "N": j, "K": 2}) != 4 * i * j:
            wrong.append(f"2*M*N*K at M={i}, N={j}")

    assert _hammer(job) == []
    assert wrong == []


def test_parsing_modules_by_many_threads_at_once_does_not_raise():
    def job(i, j):
        tree = safe_ast.parse(f"class ModelNew:\n    def forward(self, x):\n"
                              f"        return [x * {i} + k for k in range({j})]\n")
        assert isinstance(tree.body[0], ast.ClassDef)

    assert _hammer(job) == []


def test_no_parse_of_perfgym_bypasses_the_lock():
    """Every ast.parse in perfgym's source goes through safe_ast.parse."""
    root = Path(perfgym.__file__).parent
    direct = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py") if p.name != "safe_ast.py"
              for n, line in enumerate(p.read_text().splitlines(), 1)
              if re.search(r"\bast\.parse\(|\bast\.literal_eval\(", line)]
    assert direct == []


def test_the_affected_pythons_are_named_in_the_docs():
    docs = Path(__file__).parents[1] / "docs" / "development.md"
    text = docs.read_text()
    assert "gh-106905" in text and "3.11.8" in text and "3.12.2" in text
    assert sys.version_info >= (3, 10)
