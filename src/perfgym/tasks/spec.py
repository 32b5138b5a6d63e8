"""A task: what to compute, on which arrays and sizes, and how an answer is judged.

A task is a directory holding `task.toml` plus the sources it names (naive baseline, expert
kernel, optional Python reference module). `load_task` validates everything up front so a
malformed task is rejected with a message that names the field, not a traceback later.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..safe_ast import parse
from .formula import FormulaError, evaluate_formula
from .signature import C_TYPES, Signature, SignatureError, parse_signature

BUILTIN_DIR = Path(__file__).parent / "builtin"
VERIFY_MODES = ("full", "sampled")
PERTURB_MODES = ("none", "element", "diagonal")


class TaskError(ValueError):
    """A task directory or spec that cannot be used; the message names the file and field."""


class SizeError(TaskError):
    """A size a task cannot run at: not a positive integer, beyond the entry's C type or
    needing more memory than this machine has available. The message says which bound."""


# Copies of each array one evaluation of a C task may hold, counted where they are made, so that
# a size is refused before anything is allocated:
#   harness.c: two call buffers, a snapshot and an in-place snapshot of every array (4), and
#     where backends/c/build.fresh_inputs the second probe's two (2), two pristine copies of
#     every input (2), the probes' two inputs drawn anew (2, again where fresh_inputs), the
#     first call's answer of every output (1);
#   the driver (backends/c/measure.py): two input sets (2 per input), the snapshots it reads
#     back (2 of every array; 3 where fresh_inputs), the check-first call's outputs and both input sets' (3 per
#     output), the reference's answers (the two input sets' kept, one more for a snapshot: 3 per
#     output), and for an in-place array the snapshots of its input and the reference's copy (3);
#   verify.compare: about 8 float64 (complex128) arrays per output while it checks one.
# Measured (transpose 2048x2048, 64 MiB of arrays): the driver grew 616 MiB and the harness
# peaked at 289 MiB; memory_needed says 992 MiB (it adds both, though they do not peak together).
COPIES_EVERY = 4 + 2 + 3
COPIES_INPUT = 2 + 2 + 2
COPIES_OUTPUT = 1 + 3 + 3
COPIES_IN_PLACE = 3
COMPARE_WORK_ARRAYS = 8
# An evaluation may take this share of the memory available when it starts: the rest is for
# the reference's own temporaries, the compiler and whatever else the machine runs.
MEMORY_SHARE = 0.75


def available_memory() -> int | None:
    """Bytes this process may still allocate: MemAvailable, or less under a cgroup's limit;
    None where neither can be read."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                          "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            found.append(int(Path(limit).read_text()) - int(Path(usage).read_text()))
        except (OSError, ValueError):  # absent, or "max": no limit
            continue
    return min(found) if found else None


def check_size_fits(task: "Task", size: dict[str, int]) -> None:
    """Raise SizeError when `size` cannot run: a size its entry's C type cannot hold, an array
    shape that does not evaluate, or more memory than MEMORY_SHARE of what is available."""
    import numpy as np
    for p in task.signature.params:
        if not p.array and p.name in size:
            largest = int(np.iinfo(C_TYPES[p.ctype]).max)
            if size[p.name] > largest:
                raise SizeError(f"size {p.name}={size[p.name]} does not fit the entry's "
                                f"`{p.ctype} {p.name}` (at most {largest}): choose a smaller size")
    try:
        shapes = {a: task.shape(a, size) for a in task.arrays}
        needed = task.memory_needed(size)
    except (FormulaError, ArithmeticError, ValueError) as exc:
        raise SizeError(f"size {format_size(size)}: the array shapes do not evaluate ({exc})") \
            from None
    for name, shape in shapes.items():
        if any(d < 0 for d in shape):
            raise SizeError(f"size {format_size(size)} gives array {name} the shape {shape}: "
                            "choose a larger size")
    available = available_memory()
    if available is not None and needed > MEMORY_SHARE * available:
        raise SizeError(f"size {format_size(size)} needs {_gib(needed)} of memory (the arrays "
                        f"are {_gib(task.total_bytes(size))}; an evaluation holds several copies) "
                        f"but this machine has {_gib(available)} available, of which an "
                        f"evaluation may use {MEMORY_SHARE:.0%}: choose a smaller size")


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


@dataclass(frozen=True)
class ArraySpec:
    name: str
    shape: tuple[str, ...]  # formulas of the sizes
    dtype: str  # NumPy dtype name
    # "in" (must be left unchanged), "out" (garbage or zeros on entry, fully written) or
    # "inout" (holds the input on entry, the answer on return: an in-place kernel)
    role: str
    low: str = "-1.0"  # inputs are drawn uniformly from [low, high): numbers or size formulas
    high: str = "1.0"
    # How the harness changes this input before each timed call so no answer can be replayed:
    # "element" (a random element gets a value in [low, high)), "diagonal" (a random diagonal
    # element grows by that much: keeps SPD/triangular matrices well posed) or "none". Where a
    # call does many flops per "element" input element, two secret timed calls get every one
    # drawn anew (backends/c/build.fresh_inputs: the reuse probes).
    perturb: str = "element"
    # outputs: what they hold when the kernel is called: "garbage" (NaN poison, random bytes for
    # integers, drawn again for every call: every element must be written) or "zero" (the
    # contract of kernels that accumulate into their output)
    init: str = "garbage"
    # an array of structs: its fields in order, name -> C type (dtype then names the struct)
    fields: tuple[tuple[str, str], ...] = ()

    @property
    def numpy(self):
        """The NumPy dtype of an element; for a struct, laid out as the C compiler lays it."""
        import numpy as np
        if self.fields:
            return np.dtype([(f, C_TYPES[t]) for f, t in self.fields], align=True)
        return np.dtype(self.dtype)


@dataclass(frozen=True)
class Task:
    name: str
    directory: Path
    language: str
    kind: str
    description: str
    signature: Signature
    arrays: dict[str, ArraySpec]
    flops: str
    bytes: str
    reference: str  # NumPy expression over the input arrays and sizes
    default_size: dict[str, int]
    train_sizes: list[dict[str, int]]
    heldout_sizes: list[dict[str, int]]
    verify_mode: str
    rtol: float
    atol: float
    baseline: Path
    expert: Path | None
    forbidden_calls: tuple[str, ...]
    generator: str | None = None  # a Python file with make_inputs(rng, **sizes) -> arrays
    spec_hash: str = field(default="")
    # what rtol is relative to: "element" (|expected| of each element) or "array" (the largest
    # |expected| of the output: sums and reductions whose elements can cancel to near zero)
    tolerance_scale: str = "element"
    returns: str | None = None  # the output that holds the entry's return value
    # element types made of named numbers ([structs.Point] x = "double"): name -> fields
    structs: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # floating-point scalar parameters of the entry and their values ([scalars] alpha = 2.5)
    scalars: dict[str, float] = field(default_factory=dict)
    # techniques a kernel must use, else STAGE_VIOLATION (ParEval's OpenMP problems: "openmp")
    require: tuple[str, ...] = ()

    @property
    def entry(self) -> str:
        return self.signature.c_decl()

    @property
    def outputs(self) -> list[str]:
        """The arrays the kernel writes its answer to (outputs and in-place arrays)."""
        return [a.name for a in self.arrays.values() if a.role in ("out", "inout")]

    def sizes(self, which: str = "default") -> list[dict[str, int]]:
        if which == "default":
            return [self.default_size]
        if which == "train":
            return self.train_sizes
        if which == "heldout":
            return self.heldout_sizes
        if which == "smallest":  # the size with the least data: quick checks
            return [min(self.sizes("all"), key=self.total_bytes)]
        if which == "all":
            seen, out = set(), []
            for s in [self.default_size, *self.train_sizes, *self.heldout_sizes]:
                key = tuple(sorted(s.items()))
                if key not in seen:
                    seen.add(key)
                    out.append(s)
            return out
        raise TaskError(f"size set {which!r} is not one of default, train, heldout, all, "
                        "smallest")

    def total_bytes(self, size: dict[str, int]) -> int:
        return self.array_bytes(size, self.arrays)

    def array_bytes(self, size: dict[str, int], names) -> int:
        """The bytes of the arrays `names` at `size`."""
        # math.prod of Python ints: np.prod would wrap around at 2**63 and call it small
        return sum(self.arrays[n].numpy.itemsize * math.prod(self.shape(n, size))
                   for n in names)

    def memory_needed(self, size: dict[str, int]) -> int:
        """Bytes one evaluation at `size` may hold: every copy of every array (see COPIES_*) and
        the work arrays the check of each output makes. An upper bound: the harness's copies
        and the driver's are added although most of the driver's come after the harness ends."""
        needed = 0
        for a in self.arrays.values():
            elements = math.prod(self.shape(a.name, size))
            reads, writes = a.role != "out", a.role != "in"
            copies = (COPIES_EVERY + COPIES_INPUT * reads + COPIES_OUTPUT * writes
                      + COPIES_IN_PLACE * (reads and writes))
            needed += copies * a.numpy.itemsize * elements
            wide = 16 if a.dtype.startswith("complex") else 8  # compare's float64/complex128
            needed += writes * COMPARE_WORK_ARRAYS * wide * elements
        return needed

    def shape(self, array: str, size: dict[str, int]) -> tuple[int, ...]:
        return tuple(int(evaluate_formula(f, size)) for f in self.arrays[array].shape)

    def bounds(self, array: str, size: dict[str, int]) -> tuple[float, float]:
        a = self.arrays[array]
        return float(evaluate_formula(a.low, size)), float(evaluate_formula(a.high, size))

    def flop_count(self, size: dict[str, int]) -> float:
        return float(evaluate_formula(self.flops, size))

    def byte_count(self, size: dict[str, int]) -> float:
        return float(evaluate_formula(self.bytes, size))

    def check_size(self, size: dict[str, int]) -> None:
        missing = self.size_names() - set(size)
        extra = set(size) - self.size_names()
        if missing or extra:
            raise SizeError(f"size {format_size(size)} for task {self.name!r} must give exactly "
                            f"{', '.join(sorted(self.size_names()))}")
        if any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in size.values()):
            raise SizeError(f"size {format_size(size)}: every size must be a positive integer")
        check_size_fits(self, size)

    def size_names(self) -> set[str]:
        return set(self.default_size)


def format_size(size: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in size.items())


def load_task(directory: str | Path) -> Task:
    directory = Path(directory)
    spec_path = directory / "task.toml"
    if not spec_path.is_file():
        raise TaskError(f"{directory}: no task.toml (a task is a directory with task.toml; "
                        "`perfgym tasks new NAME` makes one)")
    raw_bytes = spec_path.read_bytes()
    try:
        raw = tomllib.loads(raw_bytes.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(f"{spec_path}: not valid TOML: {exc}") from None
    return _build(directory, spec_path, raw, raw_bytes)


def _need(raw: dict[str, Any], key: str, where: Path, kind: type | tuple = str) -> Any:
    if key not in raw:
        raise TaskError(f"{where}: missing field '{key}'")
    if not isinstance(raw[key], kind):
        raise TaskError(f"{where}: field '{key}' has the wrong type ({type(raw[key]).__name__})")
    return raw[key]


_KINDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
          dict: "a table", list: "a list"}


def _opt(table: dict[str, Any], key: str, where: Path, kind: type | tuple, default: Any,
         label: str | None = None) -> Any:
    """table[key], or `default` when absent; a value of another TOML type is refused by name."""
    if key not in table:
        return default
    value, kinds = table[key], kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise TaskError(f"{where}: field '{label or key}' must be "
                        f"{' or '.join(_KINDS[k] for k in kinds)}, not {_toml_type(value)}")
    return value


def _toml_type(value: Any) -> str:
    for kind in (bool, str, int, float, dict, list):
        if isinstance(value, kind):
            return _KINDS[kind]
    return type(value).__name__


def _size_table(value: Any, where: Path, label: str) -> dict[str, int]:
    """A size such as { M = 256, N = 128 }: a table of positive integers."""
    if not isinstance(value, dict):
        raise TaskError(f"{where}: field '{label}' must be a table such as {{ N = 256 }}, not "
                        f"{_toml_type(value)}")
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise TaskError(f"{where}: field '{label}.{k}' must be a positive integer, not "
                            f"{v!r}")
    return value


def _check_reference(reference: str, where: Path, names: set[str]) -> None:
    """A reference expression parses and uses only the task's inputs, sizes and scalars, np and
    Python's builtins (and the names it binds itself), so a typo fails here, not mid-run."""
    try:
        tree = parse(reference, mode="eval")
    except SyntaxError as exc:
        raise TaskError(f"{where}: field 'reference': {reference!r} is not a Python expression "
                        f"({exc.msg}); give a NumPy expression or a reference.py") from None
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
             and not isinstance(n.ctx, ast.Load)} | {n.arg for n in ast.walk(tree)
                                                      if isinstance(n, ast.arg)}
    known = names | bound | {"np", "numpy"}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id not in known and not hasattr(builtins, n.id):
            raise TaskError(f"{where}: field 'reference' uses {n.id!r}, which is no input, size "
                            f"or scalar of the task (those are {', '.join(sorted(names))})")


def _check_module(path: Path, function: str, where: Path, label: str) -> None:
    """A task's Python file parses and defines `function` at its top level (it runs later)."""
    try:
        tree = parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError) as exc:
        line = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, SyntaxError) else str(exc)
        raise TaskError(f"{where}: field '{label}': {path.name} is not valid Python ({line})") \
            from None
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if function not in defined:
        raise TaskError(f"{where}: field '{label}': {path.name} must define {function}()")


def _structs(raw: Any, where: Path) -> dict[str, tuple[tuple[str, str], ...]]:
    """[structs.Point] x = "double", y = "double": element types made of named numbers."""
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: field 'structs' must be a table of tables")
    structs = {}
    for sname, fields in raw.items():
        if not re.fullmatch(r"[A-Za-z_]\w*", sname) or sname in C_TYPES or \
                not isinstance(fields, dict) or not fields:
            raise TaskError(f"{where}: field 'structs.{sname}' must be a table such as "
                            f"[structs.Point] x = \"double\", y = \"double\"")
        for fname, ctype in fields.items():
            if not re.fullmatch(r"[A-Za-z_]\w*", fname) or ctype not in C_TYPES or \
                    C_TYPES[ctype].startswith("complex"):
                raise TaskError(f"{where}: field 'structs.{sname}.{fname}' must be a C number "
                                "type such as \"double\" or \"size_t\"")
        structs[sname] = tuple(fields.items())
    return structs


def _build(directory: Path, where: Path, raw: dict[str, Any], raw_bytes: bytes) -> Task:
    # The sections are checked in this order, so a spec with several faults is always told
    # the same first one.
    name = _need(raw, "name", where)
    language = _language(raw, where)
    structs = _structs(raw.get("structs", {}), where)
    signature = _signature(raw, where, language, structs)
    arrays = {aname: _array(aname, a, where, structs)
              for aname, a in _need(raw, "arrays", where, dict).items()}
    default, train, heldout = _sizes(_need(raw, "sizes", where, dict), where)
    size_names = set(default)
    scalars = raw.get("scalars", {})
    if not isinstance(scalars, dict):
        raise TaskError(f"{where}: field 'scalars' must be a table of numbers")
    _check_parameters(signature, arrays, scalars, size_names, where)
    returns = _returns(raw, where, signature, arrays)
    flops, nbytes = _formulas(raw, where, arrays, default)
    reference = _reference(raw, where, directory, arrays, size_names | set(scalars))
    generator = _opt(raw, "inputs", where, str, None)
    if generator is not None:
        if not (directory / generator).is_file():
            raise TaskError(f"{where}: field 'inputs' names {generator!r}, which does not exist")
        _check_module(directory / generator, "make_inputs", where, "inputs")
    mode, require, scale, rtol, atol, forbidden = _judging(raw, where)
    baseline = _source(raw, "baseline", True, directory, where)
    expert = _source(raw, "expert", False, directory, where)
    spec_hash = _spec_hash(raw_bytes, baseline, directory, raw, reference)
    return Task(
        name=name, directory=directory, language=language, kind=_opt(raw, "kind", where, str, ""),
        description=_opt(raw, "description", where, str, "").strip(), signature=signature,
        arrays=arrays,
        flops=flops, bytes=nbytes, reference=reference, default_size=dict(default),
        train_sizes=[dict(s) for s in train], heldout_sizes=[dict(s) for s in heldout],
        verify_mode=mode, rtol=float(rtol), atol=float(atol), baseline=baseline, expert=expert,
        forbidden_calls=tuple(forbidden), generator=generator,
        spec_hash=spec_hash, tolerance_scale=scale, returns=returns, structs=structs,
        scalars={k: float(v) for k, v in scalars.items()}, require=tuple(require))


def _language(raw: dict[str, Any], where: Path) -> str:
    """The task's language: one whose backend reads task directories (task.toml)."""
    language = _opt(raw, "language", where, str, "c")
    from ..backends import REGISTRY, backend
    if language not in REGISTRY or backend(language).task_format != "toml":
        toml_languages = [k for k in sorted(REGISTRY) if backend(k).task_format == "toml"]
        raise TaskError(f"{where}: field 'language' is {language!r}; a task directory's "
                        f"language is one of {', '.join(toml_languages)}")
    return language


def _signature(raw: dict[str, Any], where: Path, language: str,
               structs: dict[str, tuple[tuple[str, str], ...]]) -> Signature:
    """The `entry` declaration, parsed and accepted by the language's backend."""
    from ..backends import backend
    try:
        signature = parse_signature(_need(raw, "entry", where), frozenset(structs))
    except SignatureError as exc:
        raise TaskError(f"{where}: field 'entry': {exc}") from None
    if problem := backend(language).signature_problem(signature):
        raise TaskError(f"{where}: field 'entry': {problem}")
    return signature


def _array(aname: str, a: Any, where: Path,
           structs: dict[str, tuple[tuple[str, str], ...]]) -> ArraySpec:
    """One [arrays.NAME] table: its shape, role, dtype, perturbation, initial value and bounds."""
    field_name = f"arrays.{aname}"
    if not isinstance(a, dict) or "shape" not in a:
        raise TaskError(f"{where}: field '{field_name}.shape' is missing")
    shape = _opt(a, "shape", where, list, [], f"{field_name}.shape")
    if any(isinstance(d, bool) or not isinstance(d, (str, int)) for d in shape):
        raise TaskError(f"{where}: field '{field_name}.shape' must list sizes or formulas, "
                        "such as [\"M\", \"N + 2\", 3]")
    role = _opt(a, "role", where, str, "in", f"{field_name}.role")
    if role not in ("in", "out", "inout"):
        raise TaskError(f"{where}: field '{field_name}.role' must be 'in', 'out' or 'inout'")
    dtype = _opt(a, "dtype", where, str, "float64", f"{field_name}.dtype")
    if dtype not in set(C_TYPES.values()) and dtype not in structs:
        raise TaskError(f"{where}: field '{field_name}.dtype' {dtype!r} is not supported "
                        "(a NumPy number type, or a struct of the [structs] table)")
    perturb = _opt(a, "perturb", where, (str, bool), "element", f"{field_name}.perturb")
    perturb = {True: "element", False: "none"}.get(perturb, perturb)
    if perturb not in PERTURB_MODES:
        raise TaskError(f"{where}: field '{field_name}.perturb' must be one of "
                        f"{', '.join(PERTURB_MODES)}")
    init = _opt(a, "init", where, str, "garbage", f"{field_name}.init")
    for bound in ("low", "high"):
        _opt(a, bound, where, (int, float, str), 0, f"{field_name}.{bound}")
    if init not in ("garbage", "zero") or (init != "garbage" and role != "out"):
        raise TaskError(f"{where}: field '{field_name}.init' must be 'garbage' or 'zero', "
                        "and only outputs have one")
    return ArraySpec(
        name=aname, shape=tuple(str(d) for d in shape), dtype=dtype, role=role,
        low=str(a.get("low", -1.0)), high=str(a.get("high", 1.0)),
        perturb="none" if dtype in structs else perturb, init=init,
        fields=structs.get(dtype, ()))


def _sizes(sizes: dict[str, Any], where: Path) -> tuple[dict[str, int], list, list]:
    """The [sizes] table: the default size, and the train and held-out sizes, each naming
    exactly the default's sizes."""
    default = _size_table(_need(sizes, "default", where, dict), where, "sizes.default")
    train = _opt(sizes, "train", where, list, [default], "sizes.train")
    heldout = _opt(sizes, "heldout", where, list, [], "sizes.heldout")
    for label, group in (("train", train), ("heldout", heldout)):
        for s in group:
            _size_table(s, where, f"sizes.{label}")
            if not isinstance(s, dict) or set(s) != set(default):
                raise TaskError(f"{where}: field 'sizes.{label}' entry {s!r} must name exactly "
                                f"{', '.join(default)}")
    return default, train, heldout


def _check_parameters(signature: Signature, arrays: dict[str, ArraySpec],
                      scalars: dict[str, Any], size_names: set[str], where: Path) -> None:
    """Every entry parameter must be an array of the spec, a size or a floating-point scalar,
    and every [scalars] value a floating-point parameter."""
    for p in signature.params:
        if p.array:
            if p.name not in arrays:
                raise TaskError(f"{where}: field 'entry': array parameter {p.name!r} has no "
                                f"[arrays.{p.name}] table")
            if p.extent and arrays[p.name].shape != (str(p.extent),):
                raise TaskError(f"{where}: field 'arrays.{p.name}.shape' must be "
                                f"[\"{p.extent}\"], the entry's {p.container}")
            if p.vector and p.const and arrays[p.name].role != "in":
                raise TaskError(f"{where}: field 'arrays.{p.name}.role': a const& vector is an "
                                "input; take it by std::vector<T>& to write it")
            if C_TYPES.get(p.ctype, p.ctype) != arrays[p.name].dtype:
                raise TaskError(f"{where}: field 'arrays.{p.name}.dtype' is "
                                f"{arrays[p.name].dtype} but the entry declares {p.ctype}")
        elif not C_TYPES.get(p.ctype, "struct").startswith(("float", "int", "uint")):
            raise TaskError(f"{where}: field 'entry': parameter {p.name!r} of type {p.ctype} "
                            "must be an array (a pointer or a std::vector)")
        elif C_TYPES[p.ctype].startswith("float"):
            if not isinstance(scalars.get(p.name), (int, float)) or \
                    isinstance(scalars.get(p.name), bool):
                raise TaskError(f"{where}: field 'scalars.{p.name}': the entry's floating-point "
                                f"parameter {p.name!r} needs a value ([scalars] {p.name} = 1.5)")
        elif p.name not in size_names:
            raise TaskError(f"{where}: field 'entry': scalar parameter {p.name!r} is not a size "
                            f"(sizes: {', '.join(sorted(size_names))})")
    floating = {p.name for p in signature.params
                if not p.array and C_TYPES[p.ctype].startswith("float")}
    if stray := sorted(set(scalars) - floating):
        raise TaskError(f"{where}: field 'scalars.{stray[0]}' is not a floating-point "
                        "parameter of the entry")


def _returns(raw: dict[str, Any], where: Path, signature: Signature,
             arrays: dict[str, ArraySpec]) -> str | None:
    """The output of one element that holds the value the entry returns (`returns`), or None
    for a void entry; then every array must be a parameter of the entry or that output."""
    returns = _opt(raw, "returns", where, str, None)
    if (signature.ret == "void") != (returns is None):
        raise TaskError(f"{where}: field 'returns' names the output that holds the entry's "
                        "return value: give it exactly when the entry does not return void")
    if returns is not None:
        spec = arrays.get(returns)
        if spec is None or spec.role != "out" or spec.shape != () or \
                spec.dtype != C_TYPES.get(signature.ret, signature.ret):
            raise TaskError(f"{where}: field 'returns': [arrays.{returns}] must be an output "
                            f"with shape = [] and dtype {C_TYPES.get(signature.ret, signature.ret)}")
    for aname in arrays:
        if aname not in {p.name for p in signature.params if p.array} and aname != returns:
            raise TaskError(f"{where}: field 'arrays.{aname}' is not a parameter of the entry")
    return returns


def _formulas(raw: dict[str, Any], where: Path, arrays: dict[str, ArraySpec],
              default: dict[str, int]) -> tuple[str, str]:
    """The `flops` and `bytes` formulas; they, and every array's shape and bounds, must
    evaluate at the default size."""
    flops = str(_need(raw, "flops", where, (str, int)))
    nbytes = str(_need(raw, "bytes", where, (str, int)))
    for label, formula in (("flops", flops), ("bytes", nbytes)):
        try:
            evaluate_formula(formula, default)
        except (FormulaError, ZeroDivisionError, OverflowError) as exc:
            raise TaskError(f"{where}: field '{label}': {exc}") from None
    for a in arrays.values():
        for label, formulas in (("shape", a.shape), ("low", [a.low]), ("high", [a.high])):
            try:
                [evaluate_formula(f, default) for f in formulas]
            except (FormulaError, ArithmeticError) as exc:
                raise TaskError(f"{where}: field 'arrays.{a.name}.{label}': {exc}") from None
    return flops, nbytes


def _reference(raw: dict[str, Any], where: Path, directory: Path, arrays: dict[str, ArraySpec],
               names: set[str]) -> str:
    """The `reference`: a module of the task directory, or a NumPy expression over the inputs
    and `names` (the sizes and scalars)."""
    reference = _need(raw, "reference", where)
    if reference.endswith(".py"):
        if not (directory / reference).is_file():
            raise TaskError(f"{where}: field 'reference' names {reference!r}, which does not "
                            "exist")
        _check_module(directory / reference, "reference", where, "reference")
    else:
        _check_reference(reference, where, {a.name for a in arrays.values() if a.role != "out"}
                         | names)
    return reference


def _judging(raw: dict[str, Any], where: Path) -> tuple[str, list, str, Any, Any, list]:
    """How an answer is judged: the [verify] mode, tolerance scale and tolerances, the
    techniques a kernel must use and the calls it must not make."""
    verify = _opt(raw, "verify", where, dict, {})
    mode = _opt(verify, "mode", where, str, "full", "verify.mode")
    if mode not in VERIFY_MODES:
        raise TaskError(f"{where}: field 'verify.mode' must be one of {', '.join(VERIFY_MODES)}")
    from ..checks.stages import TECHNIQUES
    require = raw.get("require", [])
    if not isinstance(require, list) or any(t not in TECHNIQUES for t in require):
        raise TaskError(f"{where}: field 'require' must be a list of techniques from "
                        f"{', '.join(TECHNIQUES)}")
    scale = _opt(verify, "scale", where, str, "element", "verify.scale")
    rtol, atol = (_opt(verify, k, where, (int, float), d, f"verify.{k}")
                  for k, d in (("rtol", 1e-6), ("atol", 1e-9)))
    if not (rtol >= 0 and atol >= 0):
        raise TaskError(f"{where}: fields 'verify.rtol' and 'verify.atol' must not be negative")
    forbidden = _opt(raw, "forbidden_calls", where, list, [])
    if not all(isinstance(f, str) for f in forbidden):
        raise TaskError(f"{where}: field 'forbidden_calls' must be a list of function names, "
                        "such as [\"cblas_dgemm\"]")
    if scale not in ("element", "array"):
        raise TaskError(f"{where}: field 'verify.scale' must be 'element' or 'array'")
    return mode, require, scale, rtol, atol, forbidden


def _source(raw: dict[str, Any], key: str, required: bool, directory: Path,
            where: Path) -> Path | None:
    """The file a source field (`baseline`, `expert`) names in the task directory."""
    if key not in raw:
        if required:
            raise TaskError(f"{where}: missing field '{key}'")
        return None
    path = directory / _opt(raw, key, where, str, "")
    if not path.is_file():
        raise TaskError(f"{where}: field '{key}' names {raw[key]!r}, which does not exist")
    return path


def _spec_hash(raw_bytes: bytes, baseline: Path, directory: Path, raw: dict[str, Any],
               reference: str) -> str:
    """The task's identity: task.toml and every file it names that defines what is judged."""
    digest = hashlib.sha256(raw_bytes)
    digest.update(baseline.read_bytes())  # the baseline defines speedup, so it is part of the task
    for extra in (raw.get("inputs"), reference if reference.endswith(".py") else None):
        if extra:
            digest.update((directory / str(extra)).read_bytes())
    return digest.hexdigest()[:16]
