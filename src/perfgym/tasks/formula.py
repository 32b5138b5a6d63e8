"""Safe evaluation of the small arithmetic formulas a task spec uses (shapes, FLOPs, bytes)."""
from __future__ import annotations

import ast
import math
import operator
from functools import lru_cache

from ..safe_ast import parse

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
           ast.Mod: operator.mod}
_FUNCS = {"min": min, "max": max, "log2": math.log2, "sqrt": math.sqrt, "ceil": math.ceil}


class FormulaError(ValueError):
    pass


def evaluate_formula(text: str | int | float, names: dict[str, float]) -> float:
    """Evaluate `text` (e.g. "2*M*N*K") with `names` bound; only arithmetic and min/max/log2."""
    if isinstance(text, (int, float)):
        return text
    return _eval(_parsed(str(text)), names, str(text))


@lru_cache(maxsize=4096)
def _parsed(text: str) -> ast.expr:
    """A formula's tree, parsed once per text (read, never changed: shared by the threads)."""
    try:
        return parse(text, mode="eval").body
    except SyntaxError as exc:
        raise FormulaError(f"formula {text!r} does not parse: {exc.msg}") from None


def _eval(node: ast.AST, names: dict[str, float], text: str) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise FormulaError(f"formula {text!r} uses {node.id!r}, which is not a size "
                               f"(sizes: {', '.join(sorted(names)) or 'none'})")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, names, text), _eval(node.right, names, text))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names, text)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS
            and not node.keywords):
        return _FUNCS[node.func.id](*(_eval(a, names, text) for a in node.args))
    raise FormulaError(f"formula {text!r} may use only numbers, sizes, + - * / // ** % and "
                       f"{', '.join(_FUNCS)}")
