"""The answer's Triton kernels, read by the parent, as a module the replayer may import.

Importing a def runs its decorators, default values and annotations, so those are rebuilt
here from literals: `@triton.jit` (the replayer's own), `tl.constexpr` annotations, constant
defaults. Kernel bodies are kept as written once they read as Triton language
(triton_language.py: every branch, before anything compiles them); they run only after
Triton's front end has accepted them too (kernel_program.py). Besides the kernels, the module
keeps the answer's imports of triton and math and its module-level literal constants, which
kernels read as globals.
"""
from __future__ import annotations

import ast

from perfgym import safe_ast

from .kernel_names import KERNEL_IMPORTS, _is_jit, _kept_as_is, _literal, _name  # noqa: F401

HEADER = "import math\nimport triton\nimport triton.language as tl\n"


class KernelSourceError(ValueError):
    """A kernel whose definition would run code when imported."""


def kernel_module(code: str) -> str:
    from .triton_language import NotTriton, check_file
    try:
        tree = safe_ast.parse(code)
        check_file(tree)
    except NotTriton as exc:
        raise KernelSourceError(str(exc)) from None
    except (RecursionError, MemoryError):  # `x = ----...1`, as the static rules say
        raise KernelSourceError("the code nests too deeply to be read") from None
    parts = [HEADER]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
            parts.append(ast.unparse(_rebuilt(node)))
        elif _kept_as_is(node):
            parts.append(ast.unparse(node))
    return "\n\n".join(parts) + "\n"


def _rebuilt(node: ast.FunctionDef) -> ast.FunctionDef:
    """The kernel's def with the replayer's decorator and nothing that runs at import."""
    args = node.args
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is None:
            continue
        constexpr = a.annotation is not None and _name(a.annotation).endswith("constexpr")
        a.annotation = safe_ast.parse("tl.constexpr", mode="eval").body if constexpr else None
    for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
        if not _literal(default):
            raise KernelSourceError(f"kernel {node.name}: a default argument that is not a "
                                    "literal (write the value itself)")
    node.decorator_list = [safe_ast.parse("triton.jit", mode="eval").body]
    node.returns = None
    return node
