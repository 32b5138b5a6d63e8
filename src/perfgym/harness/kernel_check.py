"""Triton's front end on one of the candidate's kernels, in a process of its own.

    python kernel_check.py KERNELS_PY < {"name", "signature", "constexprs"}

Run by the replayer (kernel_program.Kernels.check) before a kernel's first launch with an
argument signature. Lowering to Triton IR accepts Triton language only, so a kernel body that
reaches into Python (which the interpreter, without a GPU, would run) is refused. A process of
its own because the replayer imported Triton to interpret, and the front end needs Triton's
library as JIT functions; it imports no torch, so it starts in a fraction of a second.

Within a batch on a root host, the parent instead forks each check from a template that has
imported Triton's front end once (torch_template.py, `checks`): `preload()` there, and
`check_here()` in the forked checker, whose work directory holds the request and the kernels.
"""
import sys

def front_end_check(path, request):
    """Lower one kernel to Triton IR: 0, or 1 with the reason printed."""
    import importlib.util
    import json

    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend
    request = json.loads(request)
    spec = importlib.util.spec_from_file_location("perfgym_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = GPUTarget("cuda", 80, 32)
    backend = make_backend(target)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    options = backend.parse_options({})
    try:
        ASTSource(getattr(module, request["name"]), request["signature"],
                  request["constexprs"]).make_ir(
            target, options, backend.get_codegen_implementation(options),
            backend.get_module_map(), context)
    except Exception as exc:
        while isinstance(exc.__cause__, Exception):  # the innermost says what is wrong
            exc = exc.__cause__
        reason = exc.args[2] if len(exc.args) == 3 and isinstance(exc.args[2], str) else str(exc)
        print(" ".join(reason.split()) or type(exc).__name__)
        return 1
    return 0


def preload():
    """What every check imports and builds, done once in the checks' template."""
    from triton._C.libtriton import ir  # noqa: F401
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource  # noqa: F401
    from triton.compiler.compiler import make_backend
    make_backend(GPUTarget("cuda", 80, 32))


def check_here():
    """A checker forked from the template: the request and the kernels it was handed."""
    with open("request.json") as f:
        return front_end_check("perfgym_kernels.py", f.read())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: kernel_check.py KERNELS_PY < request.json")
    sys.exit(front_end_check(sys.argv[1], sys.stdin.read()))
