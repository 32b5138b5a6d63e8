"""Where perfgym keeps what it measures and builds between runs."""
from __future__ import annotations

import os
from pathlib import Path


def user_cache() -> Path:
    """The user's perfgym directory ($XDG_CACHE_HOME/perfgym, else ~/.cache/perfgym), which
    no per-experiment setting moves: models, an engine's environment."""
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "perfgym"


def cache_dir() -> Path:
    """What runs measure: $PERFGYM_CACHE_DIR (an experiment's own), else user_cache()."""
    path = Path(os.environ.get("PERFGYM_CACHE_DIR") or user_cache())
    path.mkdir(parents=True, exist_ok=True)
    return path
