"""A task: what to compute, on which arrays and sizes, and how an answer is judged.

A task is a directory holding `task.toml` plus the sources it names (naive baseline, expert
kernel, optional Python reference module). `load_task` validates everything up front so a
malformed task is rejected with a message that names the field, not a traceback later.
"""
from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .formula import FormulaError, evaluate_formula
from .signature import C_TYPES, Signature, SignatureError, parse_signature

BUILTIN_DIR = Path(__file__).parent / "builtin"
VERIFY_MODES = ("full", "sampled")
PERTURB_MODES = ("none", "element", "diagonal")


class TaskError(ValueError):
    """A task directory or spec that cannot be used; the message names the file and field."""


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
    # element grows by that much: keeps SPD/triangular matrices well posed) or "none".
    perturb: str = "element"
    # outputs: what they hold when the kernel is called: "garbage" (NaN poison: every element
    # must be written) or "zero" (the contract of kernels that accumulate into their output)
    init: str = "garbage"


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
    # floating-point scalar parameters of the entry and their values ([scalars] alpha = 2.5)
    scalars: dict[str, float] = field(default_factory=dict)

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
        import numpy as np
        return sum(np.dtype(a.dtype).itemsize * int(np.prod(self.shape(a.name, size)))
                   for a in self.arrays.values())

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
            raise TaskError(f"size {format_size(size)} for task {self.name!r} must give exactly "
                            f"{', '.join(sorted(self.size_names()))}")
        if any(v <= 0 for v in size.values()):
            raise TaskError(f"size {format_size(size)}: every size must be a positive integer")

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


def _build(directory: Path, where: Path, raw: dict[str, Any], raw_bytes: bytes) -> Task:
    name = _need(raw, "name", where)
    language = raw.get("language", "c")
    from ..backends import REGISTRY, backend
    if language not in REGISTRY or backend(language).task_format != "toml":
        toml_languages = [k for k in sorted(REGISTRY) if backend(k).task_format == "toml"]
        raise TaskError(f"{where}: field 'language' is {language!r}; a task directory's "
                        f"language is one of {', '.join(toml_languages)}")
    try:
        signature = parse_signature(_need(raw, "entry", where))
    except SignatureError as exc:
        raise TaskError(f"{where}: field 'entry': {exc}") from None
    if problem := backend(language).signature_problem(signature):
        raise TaskError(f"{where}: field 'entry': {problem}")

    arrays = {}
    for aname, a in _need(raw, "arrays", where, dict).items():
        field_name = f"arrays.{aname}"
        if not isinstance(a, dict) or "shape" not in a:
            raise TaskError(f"{where}: field '{field_name}.shape' is missing")
        role = a.get("role", "in")
        if role not in ("in", "out", "inout"):
            raise TaskError(f"{where}: field '{field_name}.role' must be 'in', 'out' or 'inout'")
        dtype = a.get("dtype", "float64")
        if dtype not in set(C_TYPES.values()):
            raise TaskError(f"{where}: field '{field_name}.dtype' {dtype!r} is not supported")
        perturb = a.get("perturb", "element")
        perturb = {True: "element", False: "none"}.get(perturb, perturb)
        if perturb not in PERTURB_MODES:
            raise TaskError(f"{where}: field '{field_name}.perturb' must be one of "
                            f"{', '.join(PERTURB_MODES)}")
        init = a.get("init", "garbage")
        if init not in ("garbage", "zero") or (init != "garbage" and role != "out"):
            raise TaskError(f"{where}: field '{field_name}.init' must be 'garbage' or 'zero', "
                            "and only outputs have one")
        arrays[aname] = ArraySpec(
            name=aname, shape=tuple(str(s) for s in a["shape"]), dtype=dtype, role=role,
            low=str(a.get("low", -1.0)), high=str(a.get("high", 1.0)), perturb=perturb,
            init=init)

    sizes = _need(raw, "sizes", where, dict)
    default = _need(sizes, "default", where, dict)
    train = sizes.get("train", [default])
    heldout = sizes.get("heldout", [])
    for label, group in (("train", train), ("heldout", heldout)):
        for s in group:
            if not isinstance(s, dict) or set(s) != set(default):
                raise TaskError(f"{where}: field 'sizes.{label}' entry {s!r} must name exactly "
                                f"{', '.join(default)}")
    size_names = set(default)

    scalars = raw.get("scalars", {})
    if not isinstance(scalars, dict):
        raise TaskError(f"{where}: field 'scalars' must be a table of numbers")
    # Every entry parameter must be an array of the spec, a size or a floating-point scalar.
    for p in signature.params:
        if p.array:
            if p.name not in arrays:
                raise TaskError(f"{where}: field 'entry': array parameter {p.name!r} has no "
                                f"[arrays.{p.name}] table")
            if p.vector and p.const and arrays[p.name].role != "in":
                raise TaskError(f"{where}: field 'arrays.{p.name}.role': a const& vector is an "
                                "input; take it by std::vector<T>& to write it")
            if C_TYPES[p.ctype] != arrays[p.name].dtype:
                raise TaskError(f"{where}: field 'arrays.{p.name}.dtype' is "
                                f"{arrays[p.name].dtype} but the entry declares {p.ctype}")
        elif not C_TYPES[p.ctype].startswith(("float", "int", "uint")):
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
    # A value the entry returns is an output of one element named by `returns`.
    returns = raw.get("returns")
    if (signature.ret == "void") != (returns is None):
        raise TaskError(f"{where}: field 'returns' names the output that holds the entry's "
                        "return value: give it exactly when the entry does not return void")
    if returns is not None:
        spec = arrays.get(returns)
        if spec is None or spec.role != "out" or spec.shape != () or \
                spec.dtype != C_TYPES[signature.ret]:
            raise TaskError(f"{where}: field 'returns': [arrays.{returns}] must be an output "
                            f"with shape = [] and dtype {C_TYPES[signature.ret]}")
    for aname in arrays:
        if aname not in {p.name for p in signature.params if p.array} and aname != returns:
            raise TaskError(f"{where}: field 'arrays.{aname}' is not a parameter of the entry")

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
            except FormulaError as exc:
                raise TaskError(f"{where}: field 'arrays.{a.name}.{label}': {exc}") from None

    reference = _need(raw, "reference", where)
    if reference.endswith(".py") and not (directory / reference).is_file():
        raise TaskError(f"{where}: field 'reference' names {reference!r}, which does not exist")
    generator = raw.get("inputs")
    if generator is not None and not (directory / str(generator)).is_file():
        raise TaskError(f"{where}: field 'inputs' names {generator!r}, which does not exist")
    verify = raw.get("verify", {})
    mode = verify.get("mode", "full")
    if mode not in VERIFY_MODES:
        raise TaskError(f"{where}: field 'verify.mode' must be one of {', '.join(VERIFY_MODES)}")

    def source(key: str, required: bool) -> Path | None:
        if key not in raw:
            if required:
                raise TaskError(f"{where}: missing field '{key}'")
            return None
        path = directory / str(raw[key])
        if not path.is_file():
            raise TaskError(f"{where}: field '{key}' names {raw[key]!r}, which does not exist")
        return path

    scale = verify.get("scale", "element")
    if scale not in ("element", "array"):
        raise TaskError(f"{where}: field 'verify.scale' must be 'element' or 'array'")
    baseline = source("baseline", True)
    expert = source("expert", False)
    digest = hashlib.sha256(raw_bytes)
    digest.update(baseline.read_bytes())  # the baseline defines speedup, so it is part of the task
    for extra in (raw.get("inputs"), reference if reference.endswith(".py") else None):
        if extra:
            digest.update((directory / str(extra)).read_bytes())
    return Task(
        name=name, directory=directory, language=language, kind=raw.get("kind", ""),
        description=raw.get("description", "").strip(), signature=signature, arrays=arrays,
        flops=flops, bytes=nbytes, reference=reference, default_size=dict(default),
        train_sizes=[dict(s) for s in train], heldout_sizes=[dict(s) for s in heldout],
        verify_mode=mode, rtol=float(verify.get("rtol", 1e-6)),
        atol=float(verify.get("atol", 1e-9)), baseline=baseline, expert=expert,
        forbidden_calls=tuple(raw.get("forbidden_calls", [])), generator=generator,
        spec_hash=digest.hexdigest()[:16], tolerance_scale=scale, returns=returns,
        scalars={k: float(v) for k, v in scalars.items()})
