"""A Triton kernel body checked as Triton language, on its AST, before anything compiles it.

Triton's front end is no wall: while compiling, it calls any Python callable it reaches
through a module attribute on constant arguments (folding the call), so a body can reach
`exec` through `tl.core`; for a constant `if` it reads only the branch taken; and without a GPU
the interpreter runs the body as plain Python. So the body itself is read here, every branch
of it, against an allow-list:

  * names: the kernel's parameters and locals, other `@triton.jit` functions of the file, the
    file's literal constants (`BLOCK = 128`, `tl.constexpr(0.0)`), the modules `tl`
    (`triton.language`) and `math`, and a few builtins, called directly (`range`, `min`, ...);
  * `tl.NAME` for Triton's operations and dtypes only, `tl.math.NAME`, `libdevice.NAME` and
    `math.NAME` for their numeric functions: no chain into another module (`tl.core`,
    `triton.knobs`, `triton.runtime`, ...), no name starting with an underscore;
  * on a value (a tensor, a pointer, a dtype, a constexpr): a tensor method or property only
    (`.to`, `.dtype`, `.shape`, ...), never `.handle`, which is the interpreter's NumPy array;
  * statements and expressions of Triton's subset: assignment to names, `if`, `for` over
    `range`/`tl.range`/`tl.static_range`, `while`, `return`, arithmetic, comparisons, slices,
    literals. No `lambda`, `def`, `with`, `try`, `import`, comprehension or f-string.

What the file imports is read as `kernel_source.kernel_module` keeps it: the replayer sees
only those statements, so a name means here what it means there.
"""
from __future__ import annotations

import ast

# triton.language's operations, dtypes and helpers a kernel calls (Triton 3.x). Left out on
# purpose: its submodules (core, semantic, standard, extra, random, target_info), its classes,
# inline assembly, and anything private.
TL_FUNCTIONS = frozenset("""
abs add advance arange argmax argmin associative_scan assume atomic_add atomic_and atomic_cas
atomic_load atomic_max atomic_min atomic_or atomic_poll atomic_store atomic_xchg atomic_xor
bitonic_merge broadcast broadcast_to cast cat cdiv ceil clamp constexpr cos cumprod cumsum
debug_barrier device_assert device_print div_rn dot dot_scaled erf exp exp2 expand_dims
expect_zero fdiv flip floor fma full gather histogram interleave join load
load_tensor_descriptor log log2 make_block_ptr make_tensor_descriptor map_elementwise max
max_constancy max_contiguous maximum min minimum mul multiple_of num_programs
pair_uniform_to_normal permute philox philox_impl program_id rand rand4x randint randint4x
randn randn4x range ravel reduce reduce_or reshape rsqrt sigmoid sin softmax sort split sqrt
sqrt_rn squeeze static_assert static_print static_range store store_tensor_descriptor sub sum
swizzle2d to_tensor topk trans umulhi uint_to_uniform_float unsqueeze view where xor_sum
zeros zeros_like
""".split())
TL_DTYPES = frozenset("""
int1 int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64
float8e4b15 float8e4b8 float8e4nv float8e5 float8e5b16 pi32_t void TRITON_MAX_TENSOR_NUMEL
""".split())
# Python's math module and libdevice: numeric functions and constants, pure on their arguments
NUMERIC = frozenset("""
acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh div_rn e erf erfc exp exp2
expm1 fabs fast_expf fast_logf floor fma fmax fmin fmod hypot inf isinf isnan log log10 log1p
log2 nan nearbyint pi pow rint round rsqrt signbit sin sinh sqrt sqrt_rn tan tanh tau trunc
umulhi
""".split())
# what a value offers: tl.tensor's methods and properties, a dtype's questions, a constexpr's
# value (tl.tensor.handle is the interpreter's NumPy array and tl.tensor.type its IR type: no)
VALUE_ATTRS = frozenset("""
T abs advance argmax argmin associative_scan atomic_add atomic_and atomic_cas atomic_load
atomic_max atomic_min atomic_or atomic_poll atomic_store atomic_xchg atomic_xor broadcast_to
cast cdiv ceil cos cumprod cumsum dtype element_ty erf exp exp2 expand_dims flip floor gather
histogram item log log2 logical_and logical_or max min numel permute primitive_bitwidth ravel
reduce reduce_or reshape rsqrt shape sigmoid sin softmax sort split sqrt sqrt_rn store sum to
trans value view xor_sum is_bf16 is_bool is_floating is_fp16 is_fp32 is_fp64 is_fp8 is_int
is_int_signed is_int_unsigned is_ptr is_standard_floating scalar
""".split())
BUILTINS = frozenset({"range", "min", "max", "abs", "int", "float", "bool", "len"})
# submodules a chain may pass through, by where it starts: tl.math.exp, triton.language.load,
# tl.extra.cuda.libdevice.tanh; every other module attribute is refused
SUBMODULES = {("tl", "math"): "math", ("triton", "language"): "tl", ("tl", "extra"): "extra",
              ("extra", "cuda"): "extra", ("extra", "libdevice"): "libdevice"}
MEMBERS = {"tl": TL_FUNCTIONS | TL_DTYPES, "math": NUMERIC, "pymath": NUMERIC,
           "libdevice": NUMERIC, "triton": frozenset(), "extra": frozenset()}
LIBDEVICE_MODULES = {"triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"}

STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.If, ast.For, ast.While,
              ast.Return, ast.Pass, ast.Break, ast.Continue, ast.Assert)
EXPRESSIONS = (ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Compare, ast.Call,
               ast.Constant, ast.Attribute, ast.Subscript, ast.Name, ast.List, ast.Tuple,
               ast.Slice, ast.keyword, ast.expr_context, ast.boolop, ast.operator,
               ast.unaryop, ast.cmpop)

ALLOWED = ("a kernel body may use tl.* operations, its parameters and locals, other "
           "@triton.jit functions and literal constants")
CHAIN = "no attribute chain into another module"


class NotTriton(ValueError):
    """A kernel body that is not Triton language: one line naming the construct and line."""


def check_file(tree: ast.Module) -> None:
    """Every @triton.jit function of the module, as Triton language (NotTriton if not)."""
    scope = _module_scope(tree)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_jit(node):
            _Kernel(node, scope).check()


def violation(tree: ast.Module) -> str | None:
    try:
        check_file(tree)
    except NotTriton as exc:
        return str(exc)
    return None


def _is_jit(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    from .kernel_names import _is_jit as jit_decorator  # what the kernel module rebuilds
    return any(jit_decorator(d) for d in node.decorator_list)


def _module_scope(tree: ast.Module) -> dict[str, str]:
    """What each module-level name is where the kernels run: "jit", "constant", a module's
    kind ("tl", "math", "libdevice", "triton", "pymath"), a Triton function ("func"), or
    "unknown". The replayer's module starts with `import math, triton, triton.language as tl`
    and keeps the answer's imports of triton and math and its literal constants, in order
    (kernel_source.kernel_module); the last binding of a name is the one a kernel sees."""
    from .kernel_names import _kept_as_is, _literal_assignment
    scope = {"math": "pymath", "triton": "triton", "tl": "tl"}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope[node.name] = "jit" if _is_jit(node) else "unknown"
        elif isinstance(node, ast.ClassDef):
            scope[node.name] = "unknown"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            kept = _kept_as_is(node)
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                scope[bound] = _imported(node, alias) if kept else "unknown"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            constant = _literal_assignment(node)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        scope[n.id] = "constant" if constant else "unknown"
        else:  # for, with, if at module level: any name they bind is not the kernels'
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    scope[n.id] = "unknown"
    return scope


def _imported(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    """The kind of the name an import of triton or math binds."""
    if isinstance(node, ast.Import):
        full = alias.name if alias.asname else alias.name.split(".")[0]
    else:
        full = f"{node.module}.{alias.name}"
    if full == "math":
        return "pymath"
    if full == "triton":
        return "triton"
    if full == "triton.language":
        return "tl"
    if full == "triton.language.math":
        return "math"
    if full in LIBDEVICE_MODULES:
        return "libdevice"
    if isinstance(node, ast.ImportFrom) and node.module == "triton.language" \
            and alias.name in TL_FUNCTIONS:
        return "func"
    if isinstance(node, ast.ImportFrom) and node.module == "math" and alias.name in NUMERIC:
        return "func"
    return "unknown"


class _Kernel:
    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, scope: dict[str, str]):
        self.fn, self.scope = fn, scope
        args = fn.args
        self.values = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        for node in ast.walk(fn):  # assigned anywhere in the body: local everywhere
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.values.add(node.id)

    def refuse(self, node: ast.AST, what: str, why: str = "") -> None:
        raise NotTriton(f"kernel {self.fn.name}, line {getattr(node, 'lineno', self.fn.lineno)}"
                        f": {what} is not Triton language ({why or ALLOWED}; read before "
                        "anything compiles it)")

    def check(self) -> None:
        fn = self.fn
        if isinstance(fn, ast.AsyncFunctionDef):
            self.refuse(fn, "async def")
        if fn.args.vararg or fn.args.kwarg:
            self.refuse(fn, "*args or **kwargs")
        nodes = [n for stmt in fn.body for n in ast.walk(stmt)]  # every branch, taken or not
        # a module or a builtin only as what it is for: `tl.load`, `range(...)`, not passed on
        self.bases = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        self.called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        for node in nodes:
            self.node(node)

    def node(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            if not isinstance(node, STATEMENTS):
                self.refuse(node, f"a {type(node).__name__} statement")
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    self.target(t)
            elif isinstance(node, ast.For):
                self.target(node.target)
                if not (isinstance(node.iter, ast.Call) and self._loop(node.iter.func)):
                    self.refuse(node, f"a loop over {_shown(node.iter)}",
                                "a loop runs over range, tl.range or tl.static_range")
                if node.orelse:
                    self.refuse(node, "for ... else")
            elif isinstance(node, ast.While) and node.orelse:
                self.refuse(node, "while ... else")
            return
        if not isinstance(node, EXPRESSIONS):
            self.refuse(node, _construct(node))
        if isinstance(node, ast.Constant) and not (
                node.value is None or node.value is Ellipsis
                or isinstance(node.value, (bool, int, float, str))):
            self.refuse(node, f"a {type(node.value).__name__} literal")
        elif isinstance(node, ast.Name):
            self.name(node)
        elif isinstance(node, ast.Attribute):
            self.kind(node)
        elif isinstance(node, ast.Call):
            self.call(node)
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            kind = self.kind(node)
            if kind in MEMBERS and id(node) not in self.bases:
                self.refuse(node, f"the module {_shown(node)} used as a value")
            if kind == "builtin" and id(node) not in self.called:
                self.refuse(node, f"the builtin {_shown(node)} used as a value")

    def _loop(self, func: ast.AST) -> bool:
        if isinstance(func, ast.Name):
            return func.id == "range" and self.lookup("range") == "builtin"
        return (isinstance(func, ast.Attribute) and func.attr in ("range", "static_range")
                and self.kind(func.value) == "tl")

    def target(self, t: ast.AST) -> None:
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self.target(e)
        elif not isinstance(t, ast.Name):
            self.refuse(t, f"assigning to {_shown(t)}")

    def lookup(self, name: str) -> str:
        if name in self.values:
            return "value"
        if name in self.scope:
            return self.scope[name]
        return "builtin" if name in BUILTINS else "unknown"

    def name(self, node: ast.Name) -> str:
        kind = self.lookup(node.id)
        if kind == "unknown" and not isinstance(node.ctx, ast.Store):
            self.refuse(node, f"the name {node.id!r}", "not a parameter, a local, a "
                        "@triton.jit function, a literal constant of the file or tl")
        return kind

    def kind(self, node: ast.AST) -> str:
        """What an expression is: a module's kind, "func", "builtin", "jit" or "value"; a
        module attribute outside the allow-list is refused here."""
        if isinstance(node, ast.Name):
            kind = self.name(node)
            return "value" if kind == "constant" else kind
        if not isinstance(node, ast.Attribute):
            return "value"  # a call's result, a subscript, arithmetic: a value
        if node.attr.startswith("_"):
            self.refuse(node, f"the attribute {node.attr}")
        base = self.kind(node.value)
        if base in MEMBERS:
            sub = SUBMODULES.get((base, node.attr))
            if sub is not None:
                return sub
            if node.attr not in MEMBERS[base]:
                self.refuse(node, _shown(node), CHAIN)
            return "value" if base == "tl" and node.attr in TL_DTYPES else "func"
        if base == "value":
            if node.attr not in VALUE_ATTRS:
                self.refuse(node, f"the attribute .{node.attr} of a value")
            return "value"
        self.refuse(node, f"an attribute of {_shown(node.value)}")
        return "value"  # (not reached)

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            kind = self.name(func)
            if kind in ("jit", "builtin", "func"):
                return
            self.refuse(node, f"calling {func.id!r}")
        if isinstance(func, ast.Attribute):
            base = self.kind(func.value)
            # the attribute itself is in the allow-list, and names a function or a method
            if (base in MEMBERS or base == "value") and self.kind(func) not in MEMBERS:
                return
        self.refuse(node, f"calling {_shown(func)}")


def _shown(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _construct(node: ast.AST) -> str:
    names = {ast.Lambda: "lambda", ast.ListComp: "a comprehension", ast.SetComp:
             "a comprehension", ast.DictComp: "a comprehension", ast.GeneratorExp:
             "a generator expression", ast.JoinedStr: "an f-string", ast.NamedExpr:
             "the := operator", ast.Starred: "*unpacking", ast.Dict: "a dict", ast.Set: "a set",
             ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield"}
    return names.get(type(node), type(node).__name__)
