"""Import ParEval ("Can Large Language Models Write Parallel Code?", HPDC 2024) as perfgym tasks.

`import_pareval(checkout, out)` reads a local ParEval checkout at run time (nothing of ParEval
ships with perfgym) and writes one task directory per problem and prompt model:
`out/serial/<problem>/` and `out/omp/<problem>/`, each with ParEval's prompt as the description,
ParEval's own serial solution (`correct...` in the problem's baseline.hpp, renamed to the entry)
as the baseline every speedup is measured against, and a NumPy reference of ours. `out/import.json`
lists what was imported and what was skipped and why.

A problem is imported when perfgym can state its signature (std::vector of numbers, bool or
complex; sizes; floating scalars) and when RECIPES holds our translation: array shapes and roles,
input ranges (ParEval's driver's), sizes (the driver's, capped), and the reference. RECIPES and
UNTRANSLATED (the problems we do not translate, and why) are data: pareval_recipes.toml beside
this module, read at import (its header describes a recipe's keys), with sizes written as small
expressions of ParEval's problem size p that `size_expression` checks and evaluates (no eval).
Integer scalars that are not lengths (a source vertex, a search target, k) are given as sizes:
they are fixed per size set. Tolerances are the driver's absolute ones (`1e-4` in its validate)
plus a relative one, because perfgym checks every size it times, not ParEval's 1024 elements.
"""
from __future__ import annotations

import ast
import json
import operator
import re
import string
import tomllib
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Callable

from ..safe_ast import parse
from .signature import C_TYPES, SignatureError, parse_signature
from .spec import TaskError

MODELS = {"serial": "serial", "omp": "omp"}  # directory name -> ParEval's parallelism_model


@dataclass(frozen=True)
class Recipe:
    """Our translation of one ParEval problem."""

    shapes: dict[str, list[str]]  # every array parameter (and `result` for a return value)
    sizes: Callable[[int], dict[str, int]]  # ParEval's problem size -> our default size
    train: list[dict[str, int]]
    heldout: list[dict[str, int]]
    reference: str  # a NumPy expression, or the source of reference.py (starts with "def ")
    flops: str
    bytes: str
    ranges: dict[str, tuple] = field(default_factory=dict)  # array -> (low, high)
    inout: tuple[str, ...] = ()  # non-const vectors that hold the input on entry
    zero: tuple[str, ...] = ()  # outputs the driver zeroes before the call
    scalars: dict[str, float] = field(default_factory=dict)
    inputs: str | None = None  # source of inputs.py for structured inputs
    # how inputs are perturbed between timed calls when not "element": "none" for inputs a
    # random element change would make ill-posed, "diagonal" for the dominant matrices
    perturb: dict[str, str] = field(default_factory=dict)
    rtol: float = 1e-9
    scale: str = "element"
    note: str = ""  # why our inputs differ from the driver's, shown in the description


RECIPES_FILE = Path(__file__).with_name("pareval_recipes.toml")

# what a sizes expression may use: integers, p, min(...), max(...), + - * // and parentheses
_SIZE_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                   ast.FloorDiv: operator.floordiv}
_SIZE_FUNCTIONS = {"min": min, "max": max}
_SIZE_ALLOWED = "integers, p, min(...), max(...), + - * // and parentheses"


def size_expression(text: str) -> Callable[[int], int]:
    """A sizes expression of ParEval's problem size `p` ("min(p, 512) // 4") as a function of p.
    Anything but integers, p, min, max, + - * // and parentheses raises TaskError: the
    expression is checked and evaluated node by node, never given to eval."""
    if not isinstance(text, str):
        raise TaskError(f"sizes expression {text!r} is not a string")
    try:
        tree = parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise TaskError(f"sizes expression {text!r} is not an expression ({exc.msg}); "
                        f"allowed: {_SIZE_ALLOWED}") from None
    compiled = _compile_size(tree.body, text)

    def evaluate(p: int) -> int:
        try:
            return compiled(p)
        except ZeroDivisionError:
            raise TaskError(f"sizes expression {text!r} divides by zero at p = {p}") from None
    return evaluate


def _compile_size(node: ast.expr, text: str) -> Callable[[int], int]:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        value = node.value
        return lambda p: value
    if isinstance(node, ast.Name) and node.id == "p":
        return lambda p: p
    if isinstance(node, ast.BinOp) and type(node.op) in _SIZE_OPERATORS:
        op = _SIZE_OPERATORS[type(node.op)]
        left, right = _compile_size(node.left, text), _compile_size(node.right, text)
        return lambda p: op(left(p), right(p))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _SIZE_FUNCTIONS and len(node.args) >= 2 and not node.keywords):
        function = _SIZE_FUNCTIONS[node.func.id]
        args = [_compile_size(a, text) for a in node.args]
        return lambda p: function(a(p) for a in args)
    raise TaskError(f"sizes expression {text!r}: {ast.unparse(node)!r} is not allowed "
                    f"(allowed: {_SIZE_ALLOWED})")


def _sizes(expressions: dict) -> Callable[[int], dict[str, int]]:
    if not isinstance(expressions, dict) or not expressions:
        raise TaskError("sizes must be a table of size name -> expression of p")
    compiled = {}
    for name, text in expressions.items():
        try:
            compiled[name] = size_expression(text)
        except TaskError as exc:
            raise TaskError(f"sizes.{name}: {exc}") from None
    return lambda p: {name: f(p) for name, f in compiled.items()}


def _recipe(table: dict, snippets: dict[str, str]) -> Recipe:
    """A [recipes."<problem>"] table as a Recipe (see the TOML file's header for its keys)."""
    table = dict(table)
    params = table.pop("snippet_params", {})
    placeholders = set()
    for source in ("inputs", "reference"):
        parts = []
        for name in table.pop(f"{source}_snippets", []):
            if name not in snippets:
                raise TaskError(f"{source}_snippets: no snippet {name!r} in [snippets]")
            template = string.Template(snippets[name])
            missing = sorted(set(template.get_identifiers()) - set(params))
            if missing:
                raise TaskError(f"snippet {name!r} needs snippet_params {missing}")
            placeholders |= set(template.get_identifiers())
            parts.append(template.substitute(params))
        if source in table:
            parts.append(table[source])
        if parts:
            table[source] = "\n\n".join(parts)
    unused = sorted(set(params) - placeholders)
    if unused:
        raise TaskError(f"snippet_params {unused} are placeholders of none of its snippets")
    unknown = sorted(set(table) - {f.name for f in fields(Recipe)})
    if unknown:
        raise TaskError(f"unknown keys {unknown}")
    missing = sorted(f.name for f in fields(Recipe) if f.default is MISSING
                     and f.default_factory is MISSING and f.name not in table)
    if missing:
        raise TaskError(f"missing keys {missing}")
    table["sizes"] = _sizes(table["sizes"])
    table["ranges"] = {k: tuple(v) for k, v in table.get("ranges", {}).items()}
    for key in ("inout", "zero"):
        table[key] = tuple(table.get(key, ()))
    return Recipe(**table)


def load_recipes(path: Path = RECIPES_FILE) -> tuple[dict[str, Recipe], dict[str, str]]:
    """(RECIPES, UNTRANSLATED) from the recipes file; TaskError names the problem at fault."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{path}: {exc}") from None
    snippets = data.get("snippets", {})
    recipes = {}
    for name, table in data.get("recipes", {}).items():
        try:
            recipes[name] = _recipe(table, snippets)
        except (TaskError, ValueError, TypeError) as exc:
            raise TaskError(f'{path}: [recipes."{name}"]: {exc}') from None
    return recipes, dict(data.get("untranslated", {}))


# our translations (problem -> Recipe), and the problems we do not translate with the reason
RECIPES, UNTRANSLATED = load_recipes()


@dataclass
class Problem:
    name: str
    prompts: dict[str, str]  # directory name ("serial", "omp") -> ParEval's prompt
    bench: Path | None  # drivers/cpp/benchmarks/<type>/<name>
    size: int | None  # ParEval's serial problem size


def read_checkout(checkout: Path) -> list[Problem]:
    """ParEval's C++ problems with their serial and OpenMP prompts, driver folder and size."""
    prompts_path = checkout / "prompts" / "generation-prompts.json"
    bench_root = checkout / "drivers" / "cpp" / "benchmarks"
    if not prompts_path.is_file() or not bench_root.is_dir():
        raise TaskError(f"{checkout} is not a ParEval checkout (no prompts/generation-prompts."
                        "json or drivers/cpp/benchmarks/): clone "
                        "https://github.com/parallelcodefoundry/ParEval and pass its directory")
    problems: dict[str, Problem] = {}
    benches = {p.name: p for p in bench_root.glob("*/*") if p.is_dir()}
    sizes_path = checkout / "drivers" / "problem-sizes.json"
    sizes = json.loads(sizes_path.read_text()) if sizes_path.is_file() else {}
    for entry in json.loads(prompts_path.read_text()):
        model = {v: k for k, v in MODELS.items()}.get(entry.get("parallelism_model"))
        if model is None or entry.get("language") != "cpp":
            continue
        name = entry["name"]
        p = problems.setdefault(name, Problem(name, {}, benches.get(name),
                                              _size(sizes.get(name, {}).get("serial"))))
        p.prompts[model] = entry["prompt"]
    return [problems[k] for k in sorted(problems)]


def _size(text: str | None) -> int | None:
    """ParEval writes sizes as C expressions: "(1<<20)"."""
    m = re.fullmatch(r"\(?\s*1\s*<<\s*(\d+)\s*\)?", text or "")
    return 1 << int(m.group(1)) if m else None


def split_prompt(prompt: str) -> tuple[str, str]:
    """(the prompt without its last line, the entry signature on that last line)."""
    lines = prompt.rstrip().splitlines()
    return "\n".join(lines[:-1]), lines[-1].strip().rstrip("{").strip()


def _unsupported(signature: str, preamble: str, exc: SignatureError) -> str:
    """A short reason a signature cannot be stated (the parser's message when none fits)."""
    if "std::string" in signature:
        return "signature: strings are not supported"
    for elem in re.findall(r"vector<\s*(\w+)\s*>", signature):
        if elem not in C_TYPES and "std::string" in preamble:
            return f"signature: struct {elem} holds a std::string (only numbers are supported)"
    return f"signature: {exc}"


def prompt_structs(preamble: str) -> dict[str, dict[str, str]]:
    """The structs a prompt defines whose fields are all numbers: name -> field -> C type."""
    structs = {}
    for name, body in re.findall(r"struct\s+(\w+)\s*\{(.*?)\};", preamble, re.S):
        fields = {}
        for decl in body.split(";"):
            m = re.match(r"\s*(.*?)\s*\b(\w+(?:\s*,\s*\w+)*)\s*$", decl)
            if m and m.group(1):
                fields.update({f.strip(): " ".join(m.group(1).split())
                               for f in m.group(2).split(",")})
        if fields and all(t in C_TYPES for t in fields.values()):
            structs[name] = fields
    return structs


def driver_atol(bench: Path) -> float | None:
    """The absolute tolerance in the driver's validate(), or None when it compares exactly."""
    driver = bench / "cpu.cc"
    text = driver.read_text() if driver.is_file() else ""
    body = text[text.find("bool validate("):]
    m = re.search(r"\b(\d(?:\.\d+)?e-\d+)\b", body)
    return float(m.group(1)) if m else None


# ---- ParEval's own serial solution as a candidate ----------------------------------------------

# what ParEval's driver includes before baseline.hpp (the baselines rely on it)
_DRIVER_HEADERS = ("algorithm", "cmath", "complex", "limits", "numeric", "vector")
_CORRECT = re.compile(r"^[^\n;{}]*?\b(correct\w+)\s*\(", re.M)


def serial_solution(bench: Path, entry: str, preamble: str) -> str:
    """ParEval's `correct...` function from baseline.hpp, renamed to the entry, after the prompt's
    own definitions; every other function goes into an anonymous namespace (perfgym's object
    audit allows one global function: the entry)."""
    text = _drop_gpu_blocks((bench / "baseline.hpp").read_text())
    text = re.sub(r"\bNO_INLINE\b", "", text).replace("#pragma once", "")
    preamble = "\n".join(line for line in preamble.splitlines() if "<omp.h>" not in line)
    m = _CORRECT.search(text)
    if m is None:
        raise ValueError(f"{bench / 'baseline.hpp'}: no correct...() function")
    start = m.start()
    end = _matching_brace(text, text.index("{", m.end()))
    function = text[start:end + 1].replace(m.group(1), entry, 1)
    rest = text[:start] + text[end + 1:]
    # the entry's own struct types must not have internal linkage: they stay at file scope
    structs = re.findall(r"^struct\s+\w+\s*\{.*?\};", preamble, re.S | re.M)
    for struct in structs:
        preamble = preamble.replace(struct, "")
    includes = [line for line in (preamble + "\n" + rest).splitlines()
                if line.strip().startswith("#include")]
    body = "\n".join(line for line in (preamble + "\n" + rest).splitlines()
                     if not line.strip().startswith("#include"))
    includes = sorted(set(includes) | {f"#include <{h}>" for h in _DRIVER_HEADERS})
    return "\n\n".join(["\n".join(includes), *structs, f"namespace {{\n{body}\n}}  // namespace",
                        function]) + "\n"


def _matching_brace(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError("unbalanced braces in baseline.hpp")


def _drop_gpu_blocks(text: str) -> str:
    """Remove the `#if defined(USE_CUDA) ...` branches (keeping their #else) of a header."""
    out, stack = [], []  # stack: for each open #if, whether it is a GPU condition
    keep = True
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#if"):
            gpu = "USE_CUDA" in s or "USE_HIP" in s
            stack.append((gpu, keep))
            if gpu:
                keep = False
                continue
        elif s.startswith("#else") and stack and stack[-1][0]:
            keep = stack[-1][1]
            continue
        elif s.startswith("#endif") and stack:
            gpu, outer = stack.pop()
            if gpu:
                keep = outer
                continue
        if keep:
            out.append(line)
    return "\n".join(out)


# ---- writing tasks ----------------------------------------------------------------------------


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return "[" + ", ".join(_toml(v) for v in value) + "]"


def _task_name(problem: str, model: str) -> str:
    return "pareval_" + re.sub(r"\W", "_", problem) + "_" + model


def translate(problem: Problem, recipe: Recipe) -> dict:
    """The task.toml fields of a problem (without the per-model ones), or raise ValueError with the
    reason it cannot be stated."""
    preamble, signature_text = split_prompt(problem.prompts["serial"])
    structs = prompt_structs(preamble)
    signature = parse_signature(signature_text, frozenset(structs))
    arrays = {}
    for p in signature.params:
        if not p.vector:
            continue
        if p.name not in recipe.shapes:
            raise ValueError(f"parameter {p.name!r} is not in our translation (ParEval changed "
                             "the signature?)")
        if p.ctype not in C_TYPES and p.ctype not in structs:
            raise ValueError(f"the prompt does not define struct {p.ctype} with number fields")
        role = "in" if p.const else "inout" if p.name in recipe.inout else "out"
        arrays[p.name] = {"shape": recipe.shapes[p.name], "role": role,
                          "dtype": C_TYPES.get(p.ctype, p.ctype)}
    if signature.ret != "void":
        arrays["result"] = {"shape": [], "dtype": C_TYPES[signature.ret], "role": "out"}
    if set(arrays) != set(recipe.shapes):
        raise ValueError("our translation's arrays do not match ParEval's signature")
    for name, a in arrays.items():
        if name in recipe.ranges and a["role"] != "out":
            a["low"], a["high"] = recipe.ranges[name]
        if name in recipe.zero:
            a["init"] = "zero"
        if name in recipe.perturb:
            a["perturb"] = recipe.perturb[name]
    default = recipe.sizes(problem.size or 1 << 20)
    exact = all(a["dtype"].startswith(("int", "uint", "bool"))
                for a in arrays.values() if a["role"] != "in")
    atol = driver_atol(problem.bench) if problem.bench else None
    return {"entry": signature_text, "arrays": arrays, "default": default,
            "structs": {p.ctype: structs[p.ctype] for p in signature.params
                        if p.ctype in structs},
            "atol": 0.0 if exact else (atol if atol is not None else 1e-6),
            "rtol": 0.0 if exact else recipe.rtol, "signature": signature}


def write_task(directory: Path, problem: Problem, model: str, recipe: Recipe, fields: dict,
               require_parallel: bool) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    preamble, _ = split_prompt(problem.prompts[model])
    text = "\n".join(line for line in preamble.splitlines() if "#include" not in line).strip()
    description = f"ParEval problem {problem.name} ({model} prompt):\n\n{text}"
    code = re.sub(r"//.*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))
    if code.strip():  # helpers or constants the prompt defines before the function
        description += ("\n\nYour code must itself contain the definitions above (ParEval's "
                        "prompt gives them before the function), with its helper functions "
                        "made static.")
    if recipe.note:
        description += f"\n\n(perfgym's inputs: {recipe.note}.)"
    lines = [f"name = {_toml(_task_name(problem.name, model))}", 'language = "cpp"',
             f"kind = {_toml(problem.bench.parent.name if problem.bench else 'pareval')}",
             f"description = {_toml(description)}", f"entry = {_toml(fields['entry'])}",
             f"flops = {_toml(recipe.flops)}", f"bytes = {_toml(recipe.bytes)}",
             'baseline = "baseline.cpp"']
    if fields["signature"].ret != "void":
        lines.append('returns = "result"')
    if recipe.reference.startswith(("def ", "import ", "from ")):
        (directory / "reference.py").write_text("import numpy as np\n" + recipe.reference)
        lines.append('reference = "reference.py"')
    else:
        lines.append(f"reference = {_toml(recipe.reference)}")
    if recipe.inputs:
        (directory / "inputs.py").write_text(recipe.inputs)
        lines.append('inputs = "inputs.py"')
    if require_parallel and model == "omp":
        lines.append('require = ["openmp"]  # ParEval\'s rule: an OpenMP solution must use OpenMP')
    if recipe.scalars:
        lines += ["", "[scalars]", *(f"{k} = {_toml(v)}" for k, v in recipe.scalars.items())]
    for name, struct_fields in fields["structs"].items():
        lines += ["", f"[structs.{name}]", *(f"{k} = {_toml(v)}" for k, v in
                                            struct_fields.items())]
    for name, a in fields["arrays"].items():
        lines += ["", f"[arrays.{name}]", *(f"{k} = {_toml(v)}" for k, v in a.items())]
    lines += ["", "[sizes]", f"default = {_toml(fields['default'])}",
              f"train = {_toml(recipe.train)}", f"heldout = {_toml(recipe.heldout)}",
              "", "[verify]", 'mode = "full"',
              "# ParEval's driver's absolute tolerance, and a relative one for large sizes",
              f"atol = {_toml(fields['atol'])}", f"rtol = {_toml(fields['rtol'])}",
              f"scale = {_toml(recipe.scale)}"]
    (directory / "task.toml").write_text("\n".join(lines) + "\n")
    (directory / "prompt.txt").write_text(problem.prompts[model])  # ParEval's, verbatim


def import_pareval(checkout: Path, out: Path, require_parallel: bool = False) -> dict:
    """Write the task directories; returns (and writes to out/import.json) what was imported
    and what was skipped with the reason."""
    imported, skipped = [], []
    for problem in read_checkout(checkout):
        reason = None
        if set(problem.prompts) != set(MODELS):
            reason = "no serial and OpenMP prompts"
        elif problem.bench is None or not (problem.bench / "baseline.hpp").is_file():
            reason = "no drivers/cpp/benchmarks/*/<problem>/baseline.hpp"
        else:
            preamble, signature_text = split_prompt(problem.prompts["serial"])
            try:
                parse_signature(signature_text, frozenset(prompt_structs(preamble)))
            except SignatureError as exc:
                reason = _unsupported(signature_text, preamble, exc)
        recipe = RECIPES.get(problem.name)
        if reason is None and recipe is None:
            reason = UNTRANSLATED.get(problem.name, "no NumPy translation of this problem in "
                                      "perfgym.tasks.pareval.RECIPES")
        if reason is None:
            try:
                fields = translate(problem, recipe)
                baseline = serial_solution(problem.bench, fields["signature"].name, preamble)
            except (ValueError, OSError) as exc:
                reason = str(exc)
        if reason is not None:
            skipped.append({"problem": problem.name, "reason": reason})
            continue
        for model in MODELS:
            directory = out / model / problem.name
            write_task(directory, problem, model, recipe, fields, require_parallel)
            (directory / "baseline.cpp").write_text(baseline)
        imported.append(problem.name)
    summary = {"checkout": str(checkout), "imported": imported, "skipped": skipped,
               "models": list(MODELS), "require_parallel": require_parallel}
    out.mkdir(parents=True, exist_ok=True)
    (out / "import.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
