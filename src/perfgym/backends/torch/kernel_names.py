"""What the parent reads in an answer's Python to rebuild its Triton kernels as a module:
shared by kernel_source.py (which rebuilds them) and triton_language.py (which checks that
their bodies are Triton language), kept apart so neither imports the other."""
from __future__ import annotations

import ast

KERNEL_IMPORTS = ("triton", "math")  # what a kernel may read besides its arguments


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
