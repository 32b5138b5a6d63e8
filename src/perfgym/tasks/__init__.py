"""Tasks: the built-in suite and task directories users write."""
from __future__ import annotations

from pathlib import Path

from .spec import BUILTIN_DIR, ArraySpec, Task, TaskError, format_size, load_task

__all__ = ["ArraySpec", "Task", "TaskError", "builtin_names", "format_size", "get_task",
           "load_task", "parse_size"]


def builtin_names() -> list[str]:
    return sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / "task.toml").is_file())


def get_task(name_or_path: str | Path) -> Task:
    """A built-in task by name, or any task directory by path."""
    candidate = BUILTIN_DIR / str(name_or_path)
    if "/" not in str(name_or_path) and (candidate / "task.toml").is_file():
        return load_task(candidate)
    path = Path(name_or_path)
    if path.is_dir():
        return load_task(path)
    raise TaskError(f"no task {str(name_or_path)!r}: use one of {', '.join(builtin_names())} "
                    "or a path to a task directory")


def parse_size(text: str, task: Task) -> dict[str, int]:
    """'256' (all sizes equal) or 'M=128,N=96,K=200' into a size dict checked against the task."""
    text = text.strip()
    try:
        if "=" not in text:
            n = int(text)
            size = {k: n for k in task.default_size}
        else:
            size = {}
            for part in text.split(","):
                k, v = part.split("=")
                size[k.strip()] = int(v)
    except ValueError:
        raise TaskError(f"size {text!r} is not 'N' or 'M=..,N=..,K=..'") from None
    task.check_size(size)
    return size
