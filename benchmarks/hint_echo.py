"""How often a learning run's answers repeat the prompt hint's OpenMP clauses to the letter.

    python benchmarks/hint_echo.py REPORT.json [REPORT.json ...] [--json OUT.json]

Each REPORT is a `learning_speed.py --json` report. The OpenMP hint of perfgym's prompts gives
two clauses as examples, `reduction(+:sum)` and `reduction(+:counts[:n])`; the students of the
runs so far wrote them into kernels that have no `sum` or no `counts` (histogram's answers that
do not build). Per run and arm, this counts:

- on the held-out histogram: answers, answers that do not build, those among them holding a
  hint clause, and the reduction clauses of every answer with how many are a hint clause;
- on the training tasks: answers holding `reduction(+:sum)`, and those whose code declares no
  `sum` (the clause names a variable the kernel lacks).

Read a run with `--prompts benchmarks/prompts/openmp_no_names` (whose hint names no variable)
beside one without: the echo of the names should fall if the hint was its source. Clauses are
compared with white space removed. Errors are one line, exit 2.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HINT_CLAUSES = ("reduction(+:sum)", "reduction(+:counts[:n])")
ECHO_TASK = "histogram"
# a reduction clause: its operator, a colon, then names or array sections up to the ')'
# that closes it (an array section's [lo:len] holds no parenthesis in these answers)
CLAUSE = re.compile(r"reduction\s*\([^:()]*:[^()]*\)")
DECLARES_SUM = re.compile(r"\b(?:double|float|int|long|unsigned|size_t|int64_t|float_t)"
                          r"[\w\s*]*\bsum\b\s*[=;,\[]")


def clauses(code: str) -> list[str]:
    """The code's reduction clauses, white space removed."""
    return [re.sub(r"\s+", "", c) for c in CLAUSE.findall(code or "")]


def echo(per_sample: list[dict]) -> dict:
    """arm -> the counts named in the module docstring."""
    out: dict = {}
    for arm in sorted({r["arm"] for r in per_sample}):
        rows = [r for r in per_sample if r["arm"] == arm]
        hist = [r for r in rows if r["task"] == ECHO_TASK]
        unbuilt = [r for r in hist if r["status"] == "COMPILE_ERROR"]
        hist_clauses = [c for r in hist for c in clauses(r.get("code"))]
        train = [r for r in rows if r["split"] == "train"]
        with_sum = [r for r in train if HINT_CLAUSES[0] in clauses(r.get("code"))]
        out[arm] = {
            "histogram_answers": len(hist),
            "histogram_not_built": len(unbuilt),
            "histogram_not_built_with_hint_clause": sum(
                any(c in HINT_CLAUSES for c in clauses(r.get("code"))) for r in unbuilt),
            "histogram_reduction_clauses": len(hist_clauses),
            "histogram_hint_clauses": sum(c in HINT_CLAUSES for c in hist_clauses),
            "train_answers": len(train),
            "train_with_sum_clause": len(with_sum),
            "train_sum_clause_without_sum": sum(
                not DECLARES_SUM.search(r.get("code") or "") for r in with_sum),
        }
    return out


def fail(message: str) -> None:
    print(f"hint_echo: {message}", file=sys.stderr)
    sys.exit(2)


def read_report(path: str) -> list[dict]:
    try:
        report = json.loads(Path(path).read_text())
        rows = report["per_sample"]
    except (OSError, ValueError, KeyError, TypeError):
        fail(f"{path} is not a learning_speed.py --json report (no per_sample); "
             f"give the report's JSON file")
    if rows and "code" not in rows[0]:
        fail(f"{path} keeps no answer code in per_sample; report the run again with "
             f"learning_speed.py --report-only")
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", metavar="REPORT.json")
    ap.add_argument("--json", metavar="OUT", help="also write the counts here")
    args = ap.parse_args(argv)
    result = {path: echo(read_report(path)) for path in args.reports}
    for path, arms in result.items():
        print(path)
        for arm, n in arms.items():
            print(f"  {arm:8} histogram: {n['histogram_not_built']}/{n['histogram_answers']} "
                  f"not built, {n['histogram_not_built_with_hint_clause']} of them with a hint "
                  f"clause; clauses {n['histogram_hint_clauses']}/"
                  f"{n['histogram_reduction_clauses']} the hint's | train: "
                  f"reduction(+:sum) in {n['train_with_sum_clause']}/{n['train_answers']}, "
                  f"{n['train_sum_clause_without_sum']} without a sum")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
