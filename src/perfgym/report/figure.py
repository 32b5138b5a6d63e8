"""Writing a figure: one size and resolution for every plot of a report."""
from __future__ import annotations

from pathlib import Path


def save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
