"""MkDocs hook: a page's `<!-- results: NAME -->` becomes the table of
benchmarks/results/NAME.json, one column per machine kind (benchmarks/results_by_machine.py
writes those files): when and at which commit each kind was measured, and the run's headline
figures (its `summary`). A marker naming no file fails the build."""
from __future__ import annotations

import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
MARKER = re.compile(r"<!-- results: ([\w-]+) -->")


def table(name: str) -> str:
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"<!-- results: {name} -->: no {path}")
    machines = json.loads(path.read_text())["machines"]
    kinds = sorted(machines)
    entries = [machines[k] for k in kinds]
    figures = list(dict.fromkeys(f for e in entries for f in e.get("summary", {})))

    def row(label: str, cells: list[str]) -> str:
        return "| " + " | ".join([label, *(c.replace("|", "\\|") for c in cells)]) + " |"

    lines = [row("machine kind", [f"**{k}**" for k in kinds]),
             "|---" * (len(kinds) + 1) + "|",
             row("cores", [str(e.get("cores", "?")) for e in entries]),
             row("measured", [f"{e['date']}, at {e['commit']}" for e in entries]),
             row("earlier runs in the file", [str(len(e.get("earlier", []))) for e in entries])]
    lines += [row(f, [e.get("summary", {}).get(f, "-") for e in entries]) for f in figures]
    return "\n".join(lines)


def on_page_markdown(markdown: str, **_) -> str:
    return MARKER.sub(lambda m: table(m.group(1)), markdown)
