"""The archive of an evolve run: per island, the best kernel of each cell (feature bins), as a
Markdown grid and a picture. The search records the final archive as an "archive" event:
one {cell: candidate id} per island, a cell being its feature labels joined by "|"."""
from __future__ import annotations

from pathlib import Path

from ..store import RunStore


def final_archive(store: RunStore) -> list[dict[str, int]] | None:
    last = None
    for _, _, data in store.events("archive"):
        last = data.get("islands")
    return last


def _axes(island: dict[str, int]) -> tuple[list[str], list[str]]:
    """Row labels (the first feature) and column labels (the rest, joined)."""
    rows = sorted({k.split("|", 1)[0] for k in island})
    cols = sorted({k.split("|", 1)[1] if "|" in k else "" for k in island})
    return rows, cols


def archive_tables(store: RunStore) -> list[str]:
    """Markdown lines: one grid per island, each cell the elite's id and GFLOP/s."""
    archive = final_archive(store)
    if not archive:
        return []
    config = store.config() or {}
    features = (config.get("evolve") or {}).get("features") or []
    lines = ["", "## Archive (MAP-Elites, per island)", "",
             f"Rows: {features[0] if features else 'feature 1'}; columns: "
             f"{', '.join(features[1:]) or '-'}. Each cell: the best verified kernel found "
             "for it, `#id GFLOP/s`."]
    for i, island in enumerate(archive):
        rows, cols = _axes(island)
        lines += ["", f"Island {i}: {len(island)} cells filled", "",
                  "| | " + " | ".join(c or "-" for c in cols) + " |",
                  "| --- |" + " --- |" * len(cols)]
        for r in rows:
            cells = []
            for col in cols:
                cid = island.get(f"{r}|{col}" if col else r)
                cells.append(f"#{cid} {store.get(cid).gflops or 0:.2f}" if cid else "")
            lines.append(f"| {r} | " + " | ".join(cells) + " |")
    return lines


def plot_archive(store: RunStore, out: Path) -> Path | None:
    archive = final_archive(store)
    if not archive:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(archive), figsize=(5 * len(archive), 4), squeeze=False)
    for i, (ax, island) in enumerate(zip(axes[0], archive)):
        rows, cols = _axes(island)
        grid = np.full((max(1, len(rows)), max(1, len(cols))), np.nan)
        for key, cid in island.items():
            r, _, col = key.partition("|")
            grid[rows.index(r), cols.index(col)] = store.get(cid).gflops or 0.0
        ax.imshow(grid, cmap="viridis", aspect="auto")
        for (y, x), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(x, y, f"{v:.1f}", ha="center", va="center", color="w", fontsize=8)
        ax.set_xticks(range(len(cols)), [c or "-" for c in cols], rotation=30, fontsize=7)
        ax.set_yticks(range(len(rows)), rows, fontsize=7)
        ax.set_title(f"island {i}: GFLOP/s per cell", fontsize=9)
    fig.tight_layout()
    from .figure import save as _save
    return _save(fig, out / "archive.png")
