"""GPU tasks in the KernelBench convention: a Python problem file that defines `Model`,
`get_inputs()`, `get_init_inputs()` and module-level shape constants. A candidate defines
`ModelNew` with CUDA (load_inline) or Triton kernels. A directory of problem files (for example
a local KernelBench checkout's level1/) loads as a list of tasks."""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..safe_ast import parse
from .spec import TaskError

BUILTIN_GPU_DIR = Path(__file__).parent / "builtin_gpu"


@dataclass(frozen=True)
class TorchTask:
    name: str
    path: Path  # the problem file
    description: str
    source: str
    expert: Path | None = None  # our own solution, when there is one
    kind: str = "gpu"
    language: str = "torch"
    default_size: dict = field(default_factory=dict)  # shapes are fixed by the problem file
    spec_hash: str = ""
    forbidden_calls: tuple = ()

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def baseline(self) -> Path:  # the reference model is what speedups are measured against
        return self.path

    @property
    def entry(self) -> str:
        return "class ModelNew(nn.Module)"

    def sizes(self, which: str = "default") -> list[dict]:
        return [{}]

    def check_size(self, size: dict) -> None:
        if size:
            raise TaskError(f"task {self.name!r} fixes its shapes in the problem file; "
                            "it takes no --size")


def load_torch_task(path: str | Path) -> TorchTask:
    path = Path(path)
    try:
        source = path.read_text()
        tree = parse(source)
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: cannot read the problem file ({exc})") from None
    except SyntaxError as exc:
        raise TaskError(f"{path}: not valid Python (line {exc.lineno}: {exc.msg})") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    for needed in ("Model", "get_inputs", "get_init_inputs"):
        if needed not in defined:
            raise TaskError(f"{path}: a KernelBench problem file must define {needed}")
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    doc = ast.get_docstring(model) or ast.get_docstring(tree) or f"the PyTorch model in {path.name}"
    name = path.stem
    expert = path.parent / "solutions" / f"{name}.py"
    return TorchTask(name=name, path=path, description=" ".join(doc.split()), source=source,
                     expert=expert if expert.is_file() else None,
                     spec_hash=hashlib.sha256(source.encode()).hexdigest()[:16])


def load_problem_dir(directory: str | Path) -> list[TorchTask]:
    directory = Path(directory)
    return [load_torch_task(p) for p in sorted(directory.glob("*.py")) if not p.name.startswith("_")]


def builtin_gpu_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_GPU_DIR.glob("*.py") if not p.name.startswith("_"))
