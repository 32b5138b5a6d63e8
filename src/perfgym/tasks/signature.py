"""Parse an entry signature such as `void f(double *A, int n)` or, in C++,
`double f(std::vector<double> const& x)` into typed parameters."""
from __future__ import annotations

import re
from dataclasses import dataclass

# C element types a kernel may take, with their NumPy dtype names.
C_TYPES = {
    "double": "float64", "float": "float32", "int": "int32", "long": "int64",
    "long long": "int64", "int64_t": "int64", "int32_t": "int32", "uint8_t": "uint8",
    "unsigned char": "uint8", "unsigned int": "uint32", "uint32_t": "uint32", "size_t": "uint64",
    "bool": "bool", "std::complex<double>": "complex128", "std::complex<float>": "complex64",
}
# The element types only C++ has (the C backend refuses them, and std::vector, up front).
CPP_ONLY_TYPES = {"std::complex<double>", "std::complex<float>"}


@dataclass(frozen=True)
class Param:
    ctype: str  # element type without qualifiers, e.g. "double"
    name: str
    pointer: bool
    const: bool
    vector: bool = False  # a std::vector<ctype> by reference: an array, like a pointer
    extent: int = 0  # a std::array<ctype, extent> by reference (vector is then True too)

    @property
    def array(self) -> bool:
        """Whether the parameter carries one of the task's arrays."""
        return self.pointer or self.vector

    @property
    def container(self) -> str:
        """The C++ type of a vector or std::array parameter."""
        return (f"std::array<{self.ctype}, {self.extent}>" if self.extent else
                f"std::vector<{self.ctype}>")

    def decl(self) -> str:
        const = "const " if self.const else ""
        if self.vector:
            return f"{const}{self.container} &{self.name}"
        return f"{const}{self.ctype} {'*' if self.pointer else ''}{self.name}"


@dataclass(frozen=True)
class Signature:
    ret: str
    name: str
    params: tuple[Param, ...]

    def c_decl(self) -> str:
        return f"{self.ret} {self.name}({', '.join(p.decl() for p in self.params)})"

    @property
    def uses_cpp(self) -> bool:
        return self.ret in CPP_ONLY_TYPES or any(
            p.vector or p.ctype in CPP_ONLY_TYPES for p in self.params)


class SignatureError(ValueError):
    pass


_SIG = re.compile(r"^\s*(?P<ret>[A-Za-z_][\w :<>]*?)\s*(?<![\w:])(?P<name>[A-Za-z_]\w*)\s*"
                  r"\((?P<args>[^()]*)\)\s*;?\s*$")
_RESTRICT = re.compile(r"\b(restrict|__restrict__|__restrict)\b")
_VECTOR = re.compile(r"^(?:std::)?(?P<kind>vector|array)\s*<\s*(?P<elem>.+?)\s*"
                     r"(?:,\s*(?P<extent>\d+)\s*)?>\s*&\s*(?P<name>[A-Za-z_]\w*)$")


def parse_signature(text: str, structs: frozenset[str] = frozenset()) -> Signature:
    """`structs` names the task's struct types, which may be element types too."""
    types = set(C_TYPES) | set(structs)
    m = _SIG.match(text)
    if not m:
        raise SignatureError(f"entry {text!r} is not a C declaration of the form "
                             "'void name(type *array, int size, ...)'")
    ret = canonical_type(m.group("ret"))
    if ret != "void" and ret not in types:
        raise SignatureError(f"entry return type {ret!r} is not void or one of "
                             f"{', '.join(sorted(C_TYPES))}")
    params = []
    for raw in split_args(m.group("args")):
        raw = _RESTRICT.sub(" ", raw).strip()
        if not raw or raw == "void":
            continue
        const = bool(re.search(r"\bconst\b", raw))
        raw = re.sub(r"\bconst\b", " ", raw)
        vm = _VECTOR.match(" ".join(raw.split()))
        if vm and (vm.group("kind") == "array") == bool(vm.group("extent")):
            elem = canonical_type(vm.group("elem"))
            if elem not in types:
                raise SignatureError(f"entry parameter {raw.strip()!r}: a std::{vm.group('kind')}"
                                     f"'s element type must be one of {', '.join(sorted(types))}")
            params.append(Param(elem, vm.group("name"), False, const, vector=True,
                                extent=int(vm.group("extent") or 0)))
            continue
        if "&" in raw:
            raise SignatureError(f"entry parameter {' '.join(raw.split())!r}: the only reference "
                                 "parameters are std::vector<T> and std::array<T, N>, const& for "
                                 "an input, & for an output")
        pm = re.match(r"^(?P<type>[A-Za-z_][\w :<>]*?)\s*(?P<star>\*?)\s*(?P<name>[A-Za-z_]\w*)$",
                      " ".join(raw.split()))
        if not pm:
            raise SignatureError(f"entry parameter {raw!r} is not 'type name' or 'type *name'")
        ctype = canonical_type(pm.group("type"))
        if ctype.startswith("struct "):  # C spells the struct's tag
            ctype = ctype[len("struct "):]
        if ctype not in types:
            raise SignatureError(f"entry parameter type {ctype!r} is not one of "
                                 f"{', '.join(sorted(types))}")
        params.append(Param(ctype, pm.group("name"), bool(pm.group("star")), const))
    return Signature(ret, m.group("name"), tuple(params))


def canonical_type(ctype: str) -> str:
    """One spelling per type: `std::complex< double >` is `std::complex<double>`."""
    ctype = " ".join(ctype.split())
    return re.sub(r"\s*([<>])\s*", r"\1", ctype)


def split_args(args: str) -> list[str]:
    """Split at the commas outside template brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(args):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(args[start:i])
            start = i + 1
    return parts + [args[start:]]
