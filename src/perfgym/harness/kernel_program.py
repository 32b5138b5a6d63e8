"""A forward's kernel program: how the gym sees that the candidate's own kernels computed its
answer, in a process the candidate never touches (imported by torch_worker.py).

The candidate's worker *traces* forward on meta tensors: inputs with shapes and dtypes but no
values, so nothing forward computes there can depend on the data. What it reports is a
program: the PyTorch operators forward called and the Triton kernels it launched, with their
grids and arguments, and the tensors it brought along (its weights) by value. Its process is
compromised, so the program is only a claim about what forward does.

The *replayer* is a worker of the gym's own that never imports the candidate. It runs the
program on real inputs the candidate never saw. Each kernel is rebuilt from the candidate's
source as the parent read it (signature defaults and annotations reduced to literals, so no
code runs at definition), after the parent has read every branch of its body as Triton
language (backends/torch/triton_language.py), and must pass Triton's own front end too: a
kernel body cannot call back into PyTorch or Python. Of PyTorch's operators the replayer runs
only those that allocate, view, copy or fill. So if the replay's answer is right, the
candidate's kernels computed it, whatever its own process said; and the replay's time, taken
by the parent's clock around each replay (the kernels run in this process, so its own clock
is theirs to reach), is what those kernels cost, which the candidate's own timed calls may not
undercut.
"""
import inspect
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

# PyTorch operators (by overload packet) a program may use: none of them computes a value
# from another. Everything else (relu, add, mm, clamp_min.out, softmax, ...) is refused.
ALLOCATE = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
            "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
            "new_full", "fill_", "zero_", "scalar_tensor", "lift_fresh", "lift_fresh_copy"}
VIEW = {"view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "t", "transpose",
        "permute", "expand", "unsqueeze", "squeeze", "slice", "select", "split",
        "split_with_sizes", "unbind", "alias", "detach", "narrow", "view_as", "unflatten",
        "flatten", "movedim"}
COPY = {"clone", "copy_", "_to_copy", "contiguous", "cat", "stack"}
ALLOWED = ALLOCATE | VIEW | COPY
MAX_STEPS = 10_000  # a forward of more launches and operators than this is not one to time


class TraceError(Exception):
    """Forward cannot be recorded as a program (it read values, or used what cannot be sent)."""


class Refused(Exception):
    """The program asks the replayer for something it does not run for a candidate."""


# ---- the candidate's side: tracing forward on meta tensors ----------------------------------

class Trace(TorchDispatchMode):
    """Records every PyTorch operator forward runs, numbering the tensors it makes."""

    def __init__(self):
        super().__init__()
        self.numbers = {}  # id(tensor) -> its number in the program
        self.alive = []  # every numbered tensor, kept so that no id is reused
        self.steps = []
        self.constants = []  # tensors forward used but did not make (weights), by value

    @classmethod
    def _should_skip_dynamo(cls):
        # PyTorch wraps a mode's __torch_dispatch__ to keep torch.compile out of it, and that
        # wrapper's first call imports torch._dynamo: 1.4 s of a trace that otherwise takes 1 ms.
        # Nothing compiles here.
        return False

    def number(self, t):
        k = self.numbers.get(id(t))
        if k is None:
            k = self.numbers[id(t)] = len(self.alive)
            self.alive.append(t)
        return k

    def encode(self, x):
        if isinstance(x, torch.Tensor):
            k = self.numbers.get(id(x))
            if k is None:
                if x.device.type == "meta":
                    raise TraceError("forward used a meta tensor it did not make")
                with _disable_current_modes():
                    self.constants.append(x.detach().clone())
                k = self.number(x)
                self.steps.append({"constant": len(self.constants) - 1, "out": k})
            return {"v": k}
        if isinstance(x, (bool, int, float, str)) or x is None:
            return x
        if isinstance(x, tuple):
            return {"tuple": [self.encode(v) for v in x]}
        if isinstance(x, list):
            return [self.encode(v) for v in x]
        if isinstance(x, dict):
            return {"dict": {str(k): self.encode(v) for k, v in x.items()}}
        if isinstance(x, torch.dtype):
            return {"dtype": str(x).removeprefix("torch.")}
        if isinstance(x, torch.device):
            return {"device": "input" if x.type == "meta" else str(x)}
        if isinstance(x, (torch.memory_format, torch.layout)):
            return {type(x).__name__: str(x).removeprefix("torch.")}
        if hasattr(x, "value") and type(x).__name__ == "constexpr":  # triton's tl.constexpr
            return self.encode(x.value)
        raise TraceError(f"forward passed a {type(x).__name__} the program cannot record")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if _makes_on_the_host(func, args, kwargs):  # a buffer made without naming a device:
            kwargs["device"] = torch.device("meta")  # the inputs' kind (replayed there too)
        step = {"op": str(func), "args": self.encode(list(args)),
                "kwargs": self.encode(dict(kwargs))}
        out = func(*args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else [out]
        step["out"] = [self.number(t) if isinstance(t, torch.Tensor) else None for t in outs]
        step["many"] = isinstance(out, (tuple, list))
        self._add(step)
        return out

    def launch(self, name, grid, args, kwargs):
        self._add({"launch": name, "grid": grid, "args": self.encode(list(args)),
                   "kwargs": self.encode(dict(kwargs))})

    def _add(self, step):
        if len(self.steps) >= MAX_STEPS:
            raise TraceError(f"forward ran more than {MAX_STEPS} operators and launches")
        self.steps.append(step)


def _makes_on_the_host(func, args, kwargs):
    """A factory operator (no tensor argument) about to make a CPU tensor. (Not torch.device's
    context manager: its first use imports torch._dynamo, 1.4 s.)"""
    if not any(a.name == "device" for a in func._schema.arguments):
        return False
    if any(isinstance(a, torch.Tensor) for a in args):
        return False
    device = kwargs.get("device")
    return device is None or torch.device(device).type == "cpu"


def _grid(grid, names, args, kwargs):
    if callable(grid):
        grid = grid({**dict(zip(names, args)), **kwargs})
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    return [int(g) for g in grid]


class _Launches:
    """While tracing, a Triton launch is recorded and not run (there is no data to run on);
    an autotuner takes its first configuration (it has nothing to time)."""

    def __init__(self, trace):
        self.trace, self.saved = trace, []

    def __enter__(self):
        try:
            from triton.runtime import autotuner, jit
        except ImportError:
            return self
        classes = [jit.JITFunction]
        try:
            from triton.runtime import interpreter
            classes.append(interpreter.InterpretedFunction)
        except ImportError:
            pass
        trace = self.trace

        def run(fn, *args, grid, warmup=False, **kwargs):
            if warmup:
                return
            names = list(inspect.signature(fn.fn).parameters)
            trace.launch(fn.fn.__name__, _grid(grid, names, args, kwargs), args, kwargs)
            return

        def first_config(tuner, *args, **kwargs):
            return tuner.fn.run(*args, **kwargs, **tuner.configs[0].all_kwargs())

        for cls, method in [(c, run) for c in classes] + [(autotuner.Autotuner, first_config)]:
            self.saved.append((cls, cls.run))
            cls.run = method
        return self

    def __exit__(self, *exc):
        for cls, method in self.saved:
            cls.run = method


def trace_forward(model, args):
    """(program, constants) of model(*args), where args' tensors are meta tensors."""
    trace = Trace()
    inputs = 0
    for a in args:
        if isinstance(a, torch.Tensor):
            trace.number(a)
            inputs += 1
    with torch.no_grad(), _Launches(trace), trace:
        result = model(*args)
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if not all(type(t) is torch.Tensor for t in outs):
        raise TraceError("forward returned something other than tensors")
    program = {"inputs": inputs, "steps": trace.steps,
               "outputs": [trace.numbers.get(id(t)) for t in outs]}
    if None in program["outputs"]:
        raise TraceError("forward returned a tensor the trace did not see made")
    return program, trace.constants


# ---- the replayer's side: the program on real data -------------------------------------------

TRITON_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
                torch.float64: "fp64", torch.int64: "i64", torch.int32: "i32", torch.int16: "i16",
                torch.int8: "i8", torch.uint8: "u8", torch.bool: "i1"}


class Kernels:
    """The candidate's kernels rebuilt from the source the parent extracted, each checked by
    Triton's front end before its first launch with each argument signature."""

    def __init__(self, source, workdir=".", ask=None):
        import importlib.util
        self.ask = ask  # where the parent runs the checks: request -> verdict
        self.path = f"{workdir}/perfgym_kernels.py"
        with open(self.path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location("perfgym_kernels", self.path)
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.checked = set()

    def kernel(self, name, args, kwargs):
        fn = getattr(self.module, name, None)
        if fn is None or not hasattr(fn, "run"):
            raise Refused(f"the program launches {name!r}, which is not a kernel in the answer")
        self.check(name, fn, args, kwargs)
        return fn

    def check(self, name, fn, args, kwargs):
        """Triton's front end lowers the kernel for these argument types: Triton language
        only (an escape into Python is an unsupported call there). It runs in a process of its
        own, because without a GPU this one imported Triton to interpret, and the front end
        needs Triton's library as JIT functions: forked by the parent from a template that has
        imported the front end, where it has one (`ask`), else started here."""
        import json
        import os
        import subprocess
        signature, constexprs = {}, {}
        params = list(inspect.signature(fn.fn).parameters.values())
        bound = {**dict(zip([p.name for p in params], args)), **kwargs}
        for p in params:
            value = bound.get(p.name, p.default)
            if value is inspect.Parameter.empty:
                raise Refused(f"kernel {name} launched without its argument {p.name}")
            if "constexpr" in str(p.annotation) or value is None:
                if not (value is None or isinstance(value, (bool, int, float, str))):
                    raise Refused(f"kernel {name}'s constexpr {p.name} is a "
                                  f"{type(value).__name__}")
                signature[p.name], constexprs[p.name] = "constexpr", value
            elif isinstance(value, torch.Tensor):
                signature[p.name] = "*" + TRITON_TYPES[value.dtype]
            elif isinstance(value, bool):
                signature[p.name] = "i1"
            elif isinstance(value, int):
                signature[p.name] = "i32" if -2**31 <= value < 2**31 else "i64"
            elif isinstance(value, float):
                signature[p.name] = "fp32"
            else:
                raise Refused(f"kernel {name}'s argument {p.name} is a {type(value).__name__}")
        request = json.dumps({"name": name, "signature": signature, "constexprs": constexprs},
                             sort_keys=True)
        if request in self.checked:
            return
        if self.ask is not None:  # forked by the parent from a template (torch_template.py)
            verdict = self.ask(json.loads(request))
            if "refused" in verdict:
                raise Refused(f"kernel {name} is not Triton language (Triton's front end "
                              f"refuses it: {str(verdict['refused'])[:300]})")
            if verdict.get("ok") is True:
                self.checked.add(request)
                return
            # {"self": why}: the parent could not check it; a process of this one's does
        env = dict(os.environ, TRITON_INTERPRET="0")
        checker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_check.py")
        done = subprocess.run([sys.executable, checker, self.path], input=request,
                              capture_output=True, text=True, env=env, timeout=120)
        if done.returncode != 0:
            lines = (done.stdout.strip() or done.stderr.strip() or "no message").splitlines()
            raise Refused(f"kernel {name} is not Triton language (Triton's front end refuses "
                          f"it: {lines[-1][:300]})")
        self.checked.add(request)


def _decode(x, values, device):
    if isinstance(x, list):
        return [_decode(v, values, device) for v in x]
    if isinstance(x, dict):
        if "v" in x:
            return values[x["v"]]
        if "tuple" in x:
            return tuple(_decode(v, values, device) for v in x["tuple"])
        if "dict" in x:
            return {k: _decode(v, values, device) for k, v in x["dict"].items()}
        if "device" in x:
            return torch.device(device if x["device"] == "input" else str(x["device"]))
        for kind, cls in (("dtype", torch.dtype), ("memory_format", torch.memory_format),
                          ("layout", torch.layout)):
            if kind in x:  # a name of torch's, and only of one of these kinds
                value = getattr(torch, str(x[kind]), None)
                if not isinstance(value, cls):
                    raise Refused(f"{str(x[kind])[:40]!r} is not a torch {kind}")
                return value
        raise Refused(f"a program value {str(x)[:80]} the replayer does not know")
    return x


def _operator(name):
    parts = str(name).split(".")
    if len(parts) != 3 or parts[0] != "aten":
        raise Refused(f"forward calls {str(name)[:80]}, which is not a PyTorch operator it may "
                      "use")
    if parts[1] not in ALLOWED:
        raise Refused(f"forward computes with PyTorch ({name}): only the answer's own kernels "
                      "may compute; PyTorch may allocate, view, copy and fill")
    op = getattr(getattr(torch.ops.aten, parts[1]), parts[2], None)
    if not isinstance(op, torch._ops.OpOverload):  # an overload's name, not any attribute
        raise Refused(f"{str(name)[:80]} is not an overload of aten.{parts[1]}")
    return op


def _casts(step, args, kwargs):
    """A copy may change a float's width, never turn values into others (bool, integers)."""
    if step["op"].split(".")[1] not in ("_to_copy", "copy_"):
        return
    dtypes = [t.dtype for t in args if isinstance(t, torch.Tensor)]
    if isinstance(kwargs.get("dtype"), torch.dtype):
        dtypes.append(kwargs["dtype"])
    if len(set(dtypes)) > 1 and not all(d.is_floating_point for d in dtypes):
        raise Refused(f"forward converts {dtypes[0]} to {dtypes[-1]} with PyTorch ({step['op']}):"
                      " a conversion that changes values is computing")


def replay(program, constants, inputs, kernels, device):
    """Run the program once: its outputs (a list of tensors)."""
    values = {}
    for k, t in enumerate(inputs):
        values[k] = t
    for step in program["steps"]:
        if "constant" in step:
            values[step["out"]] = constants[step["constant"]].to(device)
        elif "launch" in step:
            args = _decode(step["args"], values, device)
            kwargs = _decode(step["kwargs"], values, device)
            kernels.kernel(step["launch"], args, kwargs)[tuple(step["grid"])](*args, **kwargs)
        else:
            fn = _operator(step["op"])
            args = _decode(step["args"], values, device)
            kwargs = _decode(step["kwargs"], values, device)
            _casts(step, args, kwargs)
            out = fn(*args, **kwargs)
            outs = list(out) if step.get("many") else [out]
            for k, t in zip(step["out"], outs):
                if k is not None:
                    values[k] = t
    outs = [values.get(k) for k in program["outputs"]]
    if not all(isinstance(t, torch.Tensor) for t in outs):
        raise Refused("the program's outputs are not tensors it made")
    return outs


if __name__ == "__main__":
    sys.exit("imported by torch_worker.py")
