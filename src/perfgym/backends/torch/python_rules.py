"""Static rules for Python (PyTorch/Triton) candidates, read from the AST: a first filter.

They turn away honest mistakes and the obvious tricks early, with a message a model can act on:
no imports beyond torch, triton and a few pure modules; no dynamic access to names (exec, eval,
getattr, __import__, globals, dunder attributes); no frame or code objects; no assignment to
anything but the candidate's own objects; no side streams or CUDA events; no process-wide torch
settings or operator overrides; no use of the reference Model. It must contain a kernel of its
own (@triton.jit, or __global__ code given to load_inline). Precision downcasts are flagged.

Python offers too many doors for rules like these to be the wall. The wall is the process
boundary (backends/torch/session.py): the reference, the comparison and the parent's clock run
where candidate code never does. `audit_python(..., enforce=False)` keeps only what the backend
needs to know (the kernels, a ModelNew), so the tests can show the wall holds without them.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from ...safe_ast import parse
from . import triton_language

ALLOWED_IMPORTS = ("torch", "triton", "math", "typing", "functools", "numbers", "itertools",
                   "dataclasses", "collections", "operator")
BANNED_CALLS = {"exec", "eval", "compile", "open", "__import__", "getattr", "setattr", "delattr",
                "globals", "locals", "vars", "input", "breakpoint", "exit", "quit", "memoryview"}
ALLOWED_DUNDERS = {"__init__", "__name__", "__call__"}
STREAM_NAMES = {"Stream", "stream", "ExternalStream", "set_stream", "Event", "elapsed_time",
                "default_stream"}
# frames, code objects and tracebacks lead to the worker's own state
FRAME_NAMES = {"gi_frame", "cr_frame", "ag_frame", "f_back", "f_globals", "f_locals",
               "f_builtins", "tb_frame", "tb_next", "gi_code", "f_code", "co_consts"}
# process-wide settings and operator overrides: they change what other code computes
GLOBAL_SETTINGS = {"set_num_threads", "set_default_dtype", "set_default_device", "library",
                   "compile", "set_flush_denormal", "use_deterministic_algorithms",
                   "set_grad_enabled", "manual_seed", "seed", "initial_seed"}
DOWNCASTS = {"half", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8"}
# (launch bounds' arguments are bounded: `[^)]*` would read on to the end from every __global__)
_GLOBAL_KERNEL = re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\([^()]{0,200}\)\s*)?"
                            r"(?:void\s+)?(\w+)\s*\(")


@dataclass
class PythonAudit:
    violation: str | None = None
    kernels: list[str] = field(default_factory=list)  # names of the candidate's own kernels
    cuda_sources: list[str] = field(default_factory=list)  # source strings given to load_inline
    triton_kernels: list[str] = field(default_factory=list)  # the @triton.jit ones
    flags: list[str] = field(default_factory=list)


def audit_python(code: str, require_kernel: bool = True, enforce: bool = True) -> PythonAudit:
    try:
        return _audit(code, require_kernel, enforce)
    except (RecursionError, MemoryError):  # `x = ----...1`, `a.a.a...`: the parser gives up
        return PythonAudit(violation="the code nests too deeply to be read (an expression "
                           "thousands of levels deep)")


def _audit(code: str, require_kernel: bool, enforce: bool) -> PythonAudit:
    audit = PythonAudit()
    try:
        tree = parse(code)
    except SyntaxError as exc:
        audit.violation = f"syntax error on line {exc.lineno}: {exc.msg}"
        return audit
    model_new = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    if not model_new:
        audit.violation = "the code defines no class ModelNew"
        return audit
    for base in model_new[0].bases if enforce else []:
        if isinstance(base, ast.Name) and base.id == "Model":
            audit.violation = "ModelNew inherits the reference Model (a fallback, not a kernel)"
            return audit

    for node in ast.walk(tree):
        reason = _check(node) if enforce else None
        if reason:
            audit.violation = reason
            return audit
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _dotted(d).endswith("jit") and "triton" in _dotted(d) or _dotted(d) == "jit"
                for d in node.decorator_list):
            audit.kernels.append(node.name)
            audit.triton_kernels.append(node.name)
        if isinstance(node, ast.Call) and _dotted(node.func).endswith("load_inline"):
            audit.cuda_sources += [s for s in _strings_into(node, tree) if "__global__" in s]
        if isinstance(node, ast.Attribute) and node.attr in DOWNCASTS or (
                isinstance(node, ast.Name) and node.id in DOWNCASTS):
            if "precision_downcast" not in audit.flags:
                audit.flags.append("precision_downcast")
    if enforce:  # (the wall reads it again: kernel_source.kernel_module)
        audit.violation = triton_language.violation(tree)
        if audit.violation:
            return audit
    for src in audit.cuda_sources:
        audit.kernels += _GLOBAL_KERNEL.findall(src)
    audit.cuda_sources = sorted(set(audit.cuda_sources))
    if require_kernel and not audit.kernels:
        audit.violation = ("no custom kernel: ModelNew must launch a Triton kernel (@triton.jit) "
                           "or CUDA code (__global__ via torch.utils.cpp_extension.load_inline)")
    return audit


def _strings_into(call: ast.Call, tree: ast.Module) -> list[str]:
    """The string literals a load_inline call is handed: in its arguments, and in what is
    assigned to the names they read (to any depth), not every string of the file."""
    assigned: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        assigned.setdefault(n.id, []).append(node.value)
    todo, seen, strings = [*call.args, *(k.value for k in call.keywords)], set(), []
    while todo:
        for n in ast.walk(todo.pop()):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                strings.append(n.value)
            elif isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                todo += assigned.get(n.id, [])
    return strings


def _check(node: ast.AST) -> str | None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        for name in names:
            if name.split(".")[0] not in ALLOWED_IMPORTS:
                return f"import {name} is not allowed (allowed: {', '.join(ALLOWED_IMPORTS)})"
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return "from ... import * is not allowed"
    elif isinstance(node, ast.Name):
        if node.id in BANNED_CALLS or node.id == "__builtins__":
            return f"{node.id} is not allowed in a candidate"
        if node.id == "Model":
            return "the candidate uses the reference Model (a fallback, not a kernel)"
    elif isinstance(node, ast.Attribute):
        if node.attr.startswith("__") and node.attr not in ALLOWED_DUNDERS:
            return f"attribute {node.attr} is not allowed in a candidate"
        if node.attr in STREAM_NAMES:
            return f"{_dotted(node)}: side streams and CUDA events are not allowed"
        if node.attr in FRAME_NAMES:
            return f"{_dotted(node)}: frame and code objects are not allowed in a candidate"
        if node.attr in GLOBAL_SETTINGS and _root(node) == "torch":
            return (f"{_dotted(node)} is not allowed: it changes process-wide torch state "
                    "(torch.compile counts as library code, not a kernel)")
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and _root(sub) not in ("self",):
                    return (f"assigning to {_dotted(sub)} is not allowed (only the candidate's "
                            "own attributes may be set)")
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        return f"{type(node).__name__.lower()} statements are not allowed in a candidate"
    return None


def _root(node: ast.AST) -> str:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else ""


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""
