"""Parse a C entry signature such as `void f(double *A, int n)` into typed parameters."""
from __future__ import annotations

import re
from dataclasses import dataclass

# C element types a kernel may take, with their NumPy dtype names.
C_TYPES = {
    "double": "float64", "float": "float32", "int": "int32", "long": "int64",
    "long long": "int64", "int64_t": "int64", "int32_t": "int32", "uint8_t": "uint8",
    "unsigned char": "uint8", "unsigned int": "uint32", "uint32_t": "uint32", "size_t": "uint64",
}


@dataclass(frozen=True)
class Param:
    ctype: str  # element type without qualifiers, e.g. "double"
    name: str
    pointer: bool
    const: bool


@dataclass(frozen=True)
class Signature:
    ret: str
    name: str
    params: tuple[Param, ...]

    def c_decl(self) -> str:
        args = ", ".join(
            f"{'const ' if p.const else ''}{p.ctype} {'*' if p.pointer else ''}{p.name}"
            for p in self.params)
        return f"{self.ret} {self.name}({args})"


class SignatureError(ValueError):
    pass


_SIG = re.compile(r"^\s*(?P<ret>[A-Za-z_][\w ]*?)\s+(?P<name>[A-Za-z_]\w*)\s*\((?P<args>[^()]*)\)"
                  r"\s*;?\s*$")
_RESTRICT = re.compile(r"\b(restrict|__restrict__|__restrict)\b")


def parse_signature(text: str) -> Signature:
    m = _SIG.match(text)
    if not m:
        raise SignatureError(f"entry {text!r} is not a C declaration of the form "
                             "'void name(type *array, int size, ...)'")
    ret = " ".join(m.group("ret").split())
    if ret != "void" and ret not in C_TYPES:
        raise SignatureError(f"entry return type {ret!r} is not void or one of "
                             f"{', '.join(sorted(C_TYPES))}")
    params = []
    for raw in m.group("args").split(","):
        raw = _RESTRICT.sub(" ", raw).strip()
        if not raw or raw == "void":
            continue
        const = bool(re.search(r"\bconst\b", raw))
        raw = re.sub(r"\bconst\b", " ", raw)
        pm = re.match(r"^(?P<type>[A-Za-z_][\w ]*?)\s*(?P<star>\*?)\s*(?P<name>[A-Za-z_]\w*)$",
                      " ".join(raw.split()))
        if not pm:
            raise SignatureError(f"entry parameter {raw!r} is not 'type name' or 'type *name'")
        ctype = " ".join(pm.group("type").split())
        if ctype not in C_TYPES:
            raise SignatureError(f"entry parameter type {ctype!r} is not one of "
                                 f"{', '.join(sorted(C_TYPES))}")
        params.append(Param(ctype, pm.group("name"), bool(pm.group("star")), const))
    return Signature(ret, m.group("name"), tuple(params))
