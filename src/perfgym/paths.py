"""Where perfgym keeps what it measures and builds between runs."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("PERFGYM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "perfgym")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path
