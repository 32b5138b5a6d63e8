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

KERNEL_IMPORTS = ("triton", "math")  # what a kernel may read besides its arguments
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


def _kept_as_is(node: ast.AST) -> bool:
    """An import of triton or math, or a literal constant: what a kernel may read."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return _triton_import(node)
    return isinstance(node, (ast.Assign, ast.AnnAssign)) and _literal_assignment(node)


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _is_jit(decorator: ast.AST) -> bool:
    return _name(decorator).split(".")[-1] == "jit"


def _triton_import(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] in KERNEL_IMPORTS
    return all(a.name.split(".")[0] in KERNEL_IMPORTS for a in node.names)


def _literal(node: ast.AST | None) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, bool, str)) or node.value is None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _literal(node.operand)
    if isinstance(node, ast.Call):  # tl.constexpr(4)
        return (_name(node).split(".")[-1] == "constexpr" and len(node.args) == 1
                and not node.keywords and _literal(node.args[0]))
    return False


def _literal_assignment(node: ast.Assign | ast.AnnAssign) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return (all(isinstance(t, ast.Name) for t in targets) and node.value is not None
            and _literal(node.value))


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
