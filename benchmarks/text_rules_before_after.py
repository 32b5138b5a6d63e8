"""The text rules over an answer before and after they were made linear (issue 14, item 1).

    python benchmarks/text_rules_before_after.py

The old rules are read from git (the commit before the rewrite) into a temporary directory; the
sizes are small because the old ones are quadratic or cubic (at 4 MiB they would take hours).
"""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BEFORE = "8d11fbd~1"
ROOT = Path(__file__).resolve().parent.parent


def old_module(path: str, name: str, into: Path):
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE}:{path}"],
                          capture_output=True, text=True, check=True).stdout
    text = text.replace("from ..extract", "from perfgym.extract").replace(
        "from .tasks", "from perfgym.tasks")
    (into / f"{name}.py").write_text(text)
    return __import__(name)


def main() -> None:
    from perfgym import extract
    from perfgym.checks import source, stages
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)
        old_stages = old_module("src/perfgym/checks/stages.py", "old_stages", Path(tmp))
        old_source = old_module("src/perfgym/checks/source.py", "old_source", Path(tmp))
        old_extract = old_module("src/perfgym/extract.py", "old_extract", Path(tmp))
        cases = [
            ("stage detectors", "a += b * c ", 11_000, old_stages.detect_techniques,
             stages.detect_techniques),
            ("library rules", "\n", 100_000, old_source.check_source, source.check_source),
            ("library rules", "__attribute__((", 60_000, old_source.check_source,
             source.check_source),
            ("comment stripper", '"\\', 20_000, old_extract.strip_comments,
             extract.strip_comments),
        ]
        for rule, unit, n, old, new in cases:
            text = unit * (n // len(unit))
            started = time.perf_counter()
            old(text)
            before = time.perf_counter() - started
            started = time.perf_counter()
            new(text)
            after = time.perf_counter() - started
            print(f"{rule:17s} {n:>7d} chars of {unit!r:18s} before {before:7.2f} s   "
                  f"after {after * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
