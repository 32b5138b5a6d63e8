"""Tasks: the built-in suite and task directories users write."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from .spec import (BUILTIN_DIR, ArraySpec, SizeError, Task, TaskError, check_size_fits,
                   format_size, load_task)

__all__ = ["ArraySpec", "SizeError", "Task", "TaskError", "builtin_names", "check_size_fits",
           "format_size", "get_task", "load_python_attr", "load_task", "parse_size"]


@lru_cache(maxsize=None)
def load_python_attr(path: str, attr: str):
    """`attr` from the Python file at `path` (a task's reference.py or inputs.py). The task
    author's code: what it raises, loading or called, is a TaskError naming the file."""
    import functools
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"perfgym_task_{Path(path).parent.name}_"
                                                  f"{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        fn = getattr(module, attr)
    except Exception as exc:
        raise TaskError(f"{path}: the task's {Path(path).name} does not load "
                        f"({type(exc).__name__}: {exc}); fix the task") from None

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TaskError:
            raise
        except Exception as exc:
            raise TaskError(f"{path}: the task's {attr}() raised {type(exc).__name__}: {exc}; "
                            "fix the task") from None
    return call


def builtin_names() -> list[str]:
    """The built-in CPU (C/OpenMP) tasks."""
    return sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / "task.toml").is_file())


def get_task(name_or_path: str | Path):
    """A built-in task by name (CPU or GPU), a C task directory, or a KernelBench-format
    problem file (.py)."""
    from .torch_task import BUILTIN_GPU_DIR, builtin_gpu_names, load_torch_task
    name = str(name_or_path)
    candidate = BUILTIN_DIR / name
    if "/" not in name and (candidate / "task.toml").is_file():
        return load_task(candidate)
    if "/" not in name and name in builtin_gpu_names():
        return load_torch_task(BUILTIN_GPU_DIR / f"{name}.py")
    path = Path(name_or_path)
    if path.is_dir():
        return load_task(path)
    if path.suffix == ".py" and path.is_file():
        return load_torch_task(path)
    raise TaskError(f"no task {name!r}: use one of {', '.join(builtin_names())} (CPU), "
                    f"{', '.join(builtin_gpu_names())} (GPU), a task directory or a "
                    "KernelBench problem file")


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
                if k.strip() in size:
                    raise SizeError(f"size {text[:80]!r} gives {k.strip()} twice")
                size[k.strip()] = int(v)
    except SizeError:
        raise
    except ValueError:
        raise SizeError(f"size {text[:80]!r} is not 'N' or 'M=..,N=..,K=..' with whole numbers "
                        f"(task {task.name!r} takes {', '.join(task.default_size)})") from None
    task.check_size(size)
    return size
