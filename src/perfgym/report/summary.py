"""A Markdown summary of a run: what ran, how it went, the best kernel and its metrics."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..metrics import pass_at_k, speedup_at_k
from ..store import RunStore
from ..tasks import format_size
from .archive import archive_tables
from .causes import lines as cause_lines, run_causes


def write_summary(store: RunStore, out: Path, plots: list[Path]) -> Path:
    config = store.config() or {}
    cands = [c for c in store.candidates() if not c.pending and c.op != "seed"]
    n, c_ok = len(cands), sum(c.ok for c in cands)
    lines = [f"# Run {store.dir.name}", ""]
    lines += [f"- {k}: `{v}`" for k, v in sorted(config.items())
              if k not in ("sampling", "model_id")]
    if ident := config.get("model_id"):  # the exact weights: name, size and SHA-256
        lines.append(f"- model weights: {ident.get('name')}, {ident.get('size') or 0:,} bytes, "
                     f"SHA-256 `{ident.get('sha256')}`")
    lines += ["", f"{n} candidates evaluated, {c_ok} correct.", ""]
    statuses = Counter(c.status for c in cands)
    lines += ["| status | candidates |", "| --- | --- |"]
    lines += [f"| {s} | {k} |" for s, k in statuses.most_common()]
    if n:
        base = _baseline_time(store)
        times = [c.outcome["timing"]["median"] if c.ok and c.outcome.get("timing") else None
                 for c in cands]
        lines += ["", "| k | pass@k | speedup@k over naive |", "| --- | --- | --- |"]
        for k in sorted({1, 5, 10, n} & set(range(1, n + 1))):
            sp = f"{speedup_at_k(base, times, k):.2f}" if base else "-"
            lines.append(f"| {k} | {pass_at_k(n, c_ok, k):.3f} | {sp} |")
    from ..search.general import passed_over, search_result
    best = search_result(store)
    for row in passed_over(store):
        lines += ["", f"Passed over: #{row['candidate']}, faster at the search's size but wrong "
                  f"at the task's train sizes: {row['message']}"]
    if best is not None:
        o = best.outcome
        lines += ["", f"## Best kernel: #{best.id} (iteration {best.iteration}, "
                  f"stage {best.stage}, {best.op})", "", o.get("message", ""), "",
                  "Lineage: " + " -> ".join(_step(c) for c in store.lineage(best.id)), "",
                  "```c", _code(best.completion), "```"]
    causes = run_causes(store)
    if causes:
        lines += ["", "## Why answers failed", "", "```", *cause_lines(causes), "```"]
    lines += archive_tables(store)
    lines += heldout_table(store)
    lines += [""] + [f"![{p.stem}]({p.name})" for p in plots]
    path = out / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def heldout_table(store: RunStore) -> list[str]:
    """The best kernels at the held-out sizes no search step saw (the last judgement)."""
    rows = None
    for _, _, data in store.events("heldout"):
        rows = data.get("rows")
    if not rows:
        return []
    sizes = [format_size(p["sizes"]) for p in rows[0]["per_size"]]
    lines = ["", "## The best kernels on held-out sizes", "",
             "Sizes the search never judged on; a cell is the status and GFLOP/s there.", "",
             "| kernel | " + " | ".join(sizes) + " |", "| --- |" + " --- |" * len(sizes)]
    for r in rows:
        cells = [f"{p['status']} {p['gflops']:.2f}" if p.get("gflops") else p["status"]
                 for p in r["per_size"]]
        lines.append(f"| #{r['candidate']} | " + " | ".join(cells) + " |")
    return lines


def _step(c) -> str:
    """One link of a lineage; a crossover names both parents."""
    from ..search.evolve import parents_of
    both = parents_of(c)
    with_ = f" with #{both[1]}" if len(both) > 1 else ""
    return f"#{c.id} {c.op}{with_} ({c.status})"


def _baseline_time(store: RunStore) -> float | None:
    """The naive kernel's median time, from the seed (SQD) or any candidate's speedup."""
    for c in store.candidates():
        if c.ok and c.outcome.get("speedup") and c.outcome.get("timing"):
            return c.outcome["timing"]["median"] * c.outcome["speedup"]
    return None


def _code(completion: str) -> str:
    """The answer's last code block, without fence lines: an opened answer (perfgym wrote its
    "```c" and the model closed only the entry's brace) has no closed block, and printed whole
    it put a fence inside the report's fence."""
    from ..extract import fenced_blocks
    blocks = fenced_blocks(completion)
    text = blocks[-1][1] if blocks else completion
    return "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith("```")).strip()
