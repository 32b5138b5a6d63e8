"""A Triton kernel body read as Triton language (backends/torch/triton_language.py): what an
honest kernel writes passes, every way out of the language is refused with its line, read in
branches that no compiler would take. A static check: no torch, no Triton, milliseconds."""
import ast
import textwrap
from pathlib import Path

import pytest

from perfgym.backends.torch.kernel_source import KernelSourceError, kernel_module
from perfgym.backends.torch.python_rules import audit_python
from perfgym.backends.torch.triton_language import violation

HEADER = "import triton\nimport triton.language as tl\n"
SOLUTIONS = Path(__file__).parents[1] / "src/perfgym/tasks/builtin_gpu/solutions"


def kernel(body: str, params: str = "x_ptr, y_ptr, n, BLOCK: tl.constexpr", top: str = "") -> str:
    return (HEADER + textwrap.dedent(top) + f"\n@triton.jit\ndef k({params}):\n"
            + textwrap.indent(textwrap.dedent(body), "    "))


def check(code: str) -> str | None:
    return violation(ast.parse(code))


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.py")), ids=lambda p: p.stem)
def test_the_projects_own_kernels_are_triton_language(path):
    assert check(path.read_text()) is None


ALLOWED = {
    "relu": """
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)
    """,
    "loops_and_branches": """
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for k0 in range(0, n, BLOCK):
            acc += 1.0
        for i in tl.static_range(4):
            acc = acc * 2 if i % 2 == 0 else acc
        for j in tl.range(0, n, BLOCK, num_stages=2):
            pass
        while n > 0:
            n -= 1
        if BLOCK >= 128 and n != 0:
            acc = -acc
        elif not BLOCK:
            acc = tl.where(acc > 0, acc, 0.0)
        else:
            return
    """,
    "values_methods_and_dtypes": """
        v = tl.load(x_ptr + tl.arange(0, BLOCK)[:, None], other=-float("inf"))
        w = v.to(tl.float16).to(y_ptr.dtype.element_ty)
        s = tl.sum(w, axis=0) + tl.max(v, 0) + v.shape[0] + min(BLOCK, 4) + abs(-1)
        t = tl.math.exp(v) + tl.math.rsqrt(v) + triton.language.exp2(v)
        tl.device_assert(n >= 0, "negative")
        assert BLOCK > 0
        tl.static_assert(BLOCK % 2 == 0)
        a, b = v, w.T
        tl.store(y_ptr, s, eviction_policy="evict_last")
    """,
    "helpers_constants_and_libdevice": """
        v = tl.load(x_ptr)
        v = tl.reduce(v, 0, combine) * SCALE + LIMIT.value
        tl.store(y_ptr, libdevice.tanh(v) + tl.extra.cuda.libdevice.erf(v) + math.pi)
    """,
}
HELPERS = """
    import math
    from triton.language.extra.cuda import libdevice
    SCALE = 2.0
    LIMIT = tl.constexpr(0.5)


    @triton.jit
    def combine(a, b):
        return tl.maximum(a, b)
"""


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_honest_kernel_bodies_pass(name):
    code = kernel(ALLOWED[name], top=HELPERS)
    assert check(code) is None
    kernel_module(code)  # the wall reads it the same way


# (body, a fragment of the refusal): each a way a body reached Python where Triton compiles or
# interprets it
REFUSED = [
    ("tl.core.builtins.exec('x = 1')", "line 9: tl.core is not Triton language"),
    ("tl.standard.core.builtins.eval('1')", "tl.standard is not"),
    ("tl.math.core.builtins.exec('1')", "tl.math.core is not"),
    ("triton.knobs.runtime.interpret", "triton.knobs is not"),
    ("triton.runtime.jit.os.system('true')", "triton.runtime is not"),
    ("triton.cdiv(n, BLOCK)", "triton.cdiv is not"),
    ("tl.inline_asm_elementwise('mov', '=r', [n], dtype=tl.int32, is_pure=True, pack=1)",
     "tl.inline_asm_elementwise is not"),
    ("exec('x = 1')", "the name 'exec'"),
    ("eval('1')", "the name 'eval'"),
    ("getattr(tl, 'core')", "the name 'getattr'"),
    ("hasattr(x_ptr, 'handle')", "the name 'hasattr'"),
    ("setattr(x_ptr, 'a', 1)", "the name 'setattr'"),
    ("__import__('os')", "the name '__import__'"),
    ("globals()", "the name 'globals'"),
    ("open('/etc/passwd')", "the name 'open'"),
    ("compile('1', 'f', 'eval')", "the name 'compile'"),
    ("vars()", "the name 'vars'"),
    ("np.maximum(x_ptr, 0)", "the name 'np'"),
    ("torch.relu(x_ptr)", "the name 'torch'"),
    ("sys.modules", "the name 'sys'"),
    ("x_ptr.handle.data", "the attribute .handle of a value"),
    ("x_ptr.__class__", "the attribute __class__"),
    ("tl._semantic", "the attribute _semantic"),
    ("tl.load.fn", "an attribute of tl.load"),
    ("tl.float32.to_ir", "the attribute .to_ir of a value"),
    ("f = tl", "the module tl used as a value"),
    ("tl.reduce(x_ptr, 0, max)", "the builtin max used as a value"),
    ("tl.reduce(x_ptr, 0, lambda a, b: a)", "lambda is not"),
    ("y = [v for v in range(4)]", "a comprehension"),
    ("tl.static_print(f'{n}')", "an f-string"),
    ("x_ptr.a = 1", "assigning to x_ptr.a"),
    ("y_ptr[0] = 1", "assigning to y_ptr[0]"),
    ("import os", "a Import statement"),
    ("with tl:\n    pass", "a With statement"),
    ("try:\n    pass\nexcept Exception:\n    pass", "a Try statement"),
    ("def inner():\n    pass", "a FunctionDef statement"),
    ("for v in [1, 2]:\n    pass", "a loop over [1, 2]"),
    ("BLOCK()", "calling 'BLOCK'"),
    ("helper()", "the name 'helper'"),
    ("(x_ptr + 1)()", "calling x_ptr + 1"),
    ("y = b'raw'", "a bytes literal"),
    ("y = {1: 2}", "a dict"),
    ("y = (z := 1)", "the := operator"),
]


@pytest.mark.parametrize("body, fragment", REFUSED, ids=[f for _, f in REFUSED])
def test_ways_out_of_the_language_are_refused(body, fragment):
    code = kernel(body, top="\ndef helper():\n    return 0\n")
    reason = check(code)
    assert reason is not None and fragment in reason, reason
    assert reason.startswith("kernel k, line ") and "\n" not in reason
    with pytest.raises(KernelSourceError, match="not Triton language"):
        kernel_module(code)


@pytest.mark.parametrize("condition", ["False", "BLOCK == -1", "tl.constexpr(0)", "n > 0"])
def test_every_branch_is_read_whatever_its_condition(condition):
    body = f"""
        if {condition}:
            pass
        else:
            v = 1
            if n > 0:
                tl.core.builtins.exec("x = 1")
    """
    assert "tl.core is not" in check(kernel(body))


def test_every_kernel_of_the_file_is_read_not_only_launched_ones():
    code = kernel("pass") + "\n\n@triton.jit\ndef unused():\n    tl.core.builtins.exec('1')\n"
    assert "kernel unused, line" in check(code)


@pytest.mark.parametrize("top, body", [
    ("import triton.language.core as tl", "tl.load(x_ptr)"),
    ("from triton.language import core as tl", "tl.load(x_ptr)"),
    ("tl = __builtins__", "tl.load(x_ptr)"),
    ("from triton.language import core", "core.builtins"),
    ("SCALE = len", "SCALE"),
    ("for SCALE in range(2):\n    pass", "SCALE"),
])
def test_a_name_means_what_the_replayers_module_binds(top, body):
    """Only the literal constants and the imports of triton and math reach the replayer's
    module, so any other module-level binding of a name is refused in a body."""
    name = body.split(".")[0].split("(")[0]
    assert f"the name {name!r}" in check(kernel(body, top=top))


def test_the_static_rules_refuse_it_first_with_the_same_line():
    code = kernel("tl.core.builtins.exec('1')") + "\n\nclass ModelNew:\n    pass\n"
    assert "tl.core is not Triton language" in audit_python(code).violation
    assert audit_python(code, enforce=False).violation is None  # the wall's, not the filter's


def test_cuda_sources_are_what_load_inline_is_handed():
    code = HEADER + textwrap.dedent('''
        from torch.utils.cpp_extension import load_inline
        A = "__global__ void a() {}"
        B = A
        NOT_HANDED = "__global__ void b() {}"
        ext = load_inline(name="x", cpp_sources="", cuda_sources=[B], functions=[])

        class ModelNew:
            pass
        ''')
    audit = audit_python(code)
    assert audit.cuda_sources == ["__global__ void a() {}"]


def test_source_too_deep_to_read_is_refused_not_raised():
    with pytest.raises(KernelSourceError, match="nests too deeply"):
        kernel_module("x = " + "-" * 100_000 + "1\n")
