"""The kernel program (harness/kernel_program.py): forward traced without values in the
candidate's process, replayed by a worker that never imports the candidate.

The hostile decoys are in gpu/ (test_gpu_hostile.py); here are what a one-line header cannot
say: honest answers of every launch form stay OK, a liar about its own time is charged what its
kernels cost, and the kernel module the replayer imports runs no code of the candidate's."""
import importlib.util
import textwrap

import pytest

from perfgym import EvalConfig, Status, evaluate, get_task
from perfgym.backends.torch.kernel_source import KernelSourceError, kernel_module

pytest.importorskip("torch", reason="torch is not installed: pip install torch==2.13.0")
pytest.importorskip("triton", reason="the gpu extra is not installed: pip install 'perfgym[gpu]'")

QUICK = EvalConfig(use_cache=False, trials=2, max_time=0.2, max_samples=5, min_samples=3,
                   torch_timeout=120.0)

HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"

# Honest answers in the forms a model writes: a helper jit function and a module constant, an
# autotuned kernel with a grid lambda (one configuration: the interpreter cannot time more), heuristics, a kernel on a reshaped view with a buffer
# made without naming a device, and a float16 round trip through copies.
HONEST = {
    "helper_and_constant": '''
LIMIT = tl.constexpr(0.0)  # a global a kernel reads must be constexpr


@triton.jit
def clamp_low(v):
    return tl.maximum(v, LIMIT)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, clamp_low(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 2048),)](x, y, x.numel(), BLOCK=2048)
        return y
''',
    "autotune_grid_lambda": '''
@triton.autotune(configs=[triton.Config({"BLOCK": 2048})], key=["n"])  # one: nothing to time

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        return y
''',
    "heuristics_view_default_device": '''
@triton.heuristics({"BLOCK": lambda args: 4096 if args["n"] > 4096 else 1024})
@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        flat = x.reshape(-1)
        out = torch.empty(flat.shape[0], dtype=x.dtype)
        relu_kernel[(triton.cdiv(flat.shape[0], 1024),)](flat, out, flat.shape[0])
        return out.view(x.shape)
''',
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_launch_forms_stay_ok(name):
    o = evaluate(get_task("relu"), HEADER + HONEST[name], None, QUICK)
    assert o.ok, o.message + o.details
    assert "charged_replay_time" not in o.flags or o.speedup < 0.2


# Shows the tracer an honest kernel (its input is on the meta device there) and answers real
# calls with PyTorch, 100x faster on this CPU than an interpreted kernel: the answer is right,
# the replayed program is right, and only its time is a lie.
TIME_LIAR = HEADER + '''
@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.device.type == "meta":
            y = torch.empty_like(x)
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
            return y
        return torch.relu(x)
'''


def test_a_forward_faster_than_its_own_kernels_is_charged_their_time():
    task = get_task("relu")
    liar = evaluate(task, TIME_LIAR, None, QUICK.replace(extra={"static_rules": False}))
    honest = evaluate(task, task.expert.read_text(), None, QUICK)
    assert liar.ok and honest.ok, liar.message + honest.message
    # charged, it is as slow as an honest kernel (on this CPU, interpreted: PyTorch is ~100x
    # faster); where PyTorch's relu is no faster than the kernel (a GPU) there is nothing to
    # charge, and nothing gained
    assert "charged_replay_time" in liar.flags or liar.speedup < 1.3 * honest.speedup
    assert liar.speedup < 3 * honest.speedup, (liar.message, honest.message)


def test_forward_that_reads_values_is_told_why():
    code = HEADER + textwrap.dedent('''
        @triton.jit
        def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(y_ptr + offs, tl.maximum(v, 0.0), mask=offs < n)


        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.empty_like(x)
                if float(x.abs().sum()) >= 0:  # a value read on the host
                    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
                return y
        ''')
    o = evaluate(get_task("relu"), code, None, QUICK)
    assert o.status is Status.LIBRARY_VIOLATION
    assert "read tensor values on the host" in o.message or "aten.abs" in o.message, o.message


def test_kernel_module_runs_no_code_of_the_candidate_at_import(tmp_path, capsys):
    code = textwrap.dedent('''
        import os
        import triton
        import triton.language as tl
        from triton.language.extra import libdevice
        SCALE = 2.0
        BLOCK_DEFAULT: tl.constexpr = tl.constexpr(128)
        NOT_LITERAL = os.getpid()

        @triton.autotune(configs=[], key=print("decorator ran"))
        @triton.jit
        def k(x_ptr, n: int, B: tl.constexpr = 64, flag: "os.system('x')" = None) -> print("r"):
            pass

        def not_a_kernel():
            pass
        ''')
    module = kernel_module(code)
    path = tmp_path / "kernels.py"
    path.write_text(module)
    spec = importlib.util.spec_from_file_location("kernels", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))  # literals and jit only
    assert "ran" not in capsys.readouterr().out
    assert "print" not in module and "os" not in module.replace("import math", "")
    assert "SCALE = 2.0" in module and "NOT_LITERAL" not in module
    assert "not_a_kernel" not in module and "libdevice" in module
    assert "@triton.jit" in module and "B: tl.constexpr=64, flag=None" in module
    for bad_default in ("__import__('os').getpid()", "[i for i in range(3)]", "len('x')"):
        with pytest.raises(KernelSourceError, match="literal"):
            kernel_module(f"import triton\n@triton.jit\ndef k(x, y={bad_default}):\n    pass\n")


# Programs a taken-over worker may send, replayed in this process (the replayer's code, no
# sandbox needed to see the refusal): nothing in a program names more than an allowed operator,
# a torch dtype/layout/memory format, a device, or a kernel of the answer's.
FORGED = {
    "computing operator": ({"op": "aten.relu.default", "args": [{"v": 0}]}, "computes"),
    "attribute for an overload": ({"op": "aten.empty.__class__", "args": []}, "not an overload"),
    "not aten": ({"op": "torch.load.default", "args": ["x"]}, "not a PyTorch operator"),
    "function as a dtype": ({"op": "aten.empty.memory_format",
                             "args": [[4]], "kwargs": {"dict": {"dtype": {"dtype": "load"}}}},
                            "not a torch dtype"),
    "function as a layout": ({"op": "aten.empty.memory_format", "args": [[4]],
                              "kwargs": {"dict": {"layout": {"layout": "save"}}}},
                             "not a torch layout"),
    "a kernel not in the answer": ({"launch": "system", "grid": [1], "args": []}, "not a kernel"),
    "a value-changing cast": ({"op": "aten._to_copy.default", "args": [{"v": 0}],
                               "kwargs": {"dict": {"dtype": {"dtype": "bool"}}}},
                              "changes values"),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_program_runs_nothing_but_what_is_allowed(name, tmp_path):
    import sys
    from pathlib import Path

    import torch

    import perfgym
    sys.path.insert(0, str(Path(perfgym.__file__).parent / "harness"))
    try:
        import kernel_program
    finally:
        sys.path.pop(0)
    step, why = FORGED[name]
    step = {"kwargs": {"dict": {}}, "out": [1], **step}
    program = {"inputs": 1, "steps": [step], "outputs": [1]}
    kernels = kernel_program.Kernels(kernel_module(HEADER + HONEST["helper_and_constant"]),
                                     str(tmp_path))
    with pytest.raises(kernel_program.Refused, match=why):
        kernel_program.replay(program, [], [torch.randn(4)], kernels, "cpu")


# The time liar above, whose kernel also stops the replayer's clock: reached through
# tl.core.builtins.exec, which the front end folds and the CPU's interpreter runs in the
# replayer. The kernel-language check refuses it (gpu/compile_exec_core_builtins.py); here it
# is switched off, to show that the replay's time does not come from the replayer's clock.
CLOCK_PATCHER = HEADER + '''
PATCH = tl.constexpr("import time; time.perf_counter = lambda: 0.0")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.core.builtins.exec(PATCH.value)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.device.type == "meta":
            y = torch.empty_like(x)
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
            return y
        return torch.relu(x)
'''


def test_a_replayer_whose_clock_is_patched_is_timed_by_the_parent(monkeypatch):
    from perfgym.backends.torch import triton_language
    monkeypatch.setattr(triton_language, "check_file", lambda tree: None)
    o = evaluate(get_task("relu"), CLOCK_PATCHER, None,
                 QUICK.replace(extra={"static_rules": False}))
    assert o.ok, o.message + o.details
    # on this CPU PyTorch's relu is ~100x faster than the interpreted kernel: uncharged, the
    # liar would be that much faster than its own kernels
    assert "charged_replay_time" in o.flags, o.message
