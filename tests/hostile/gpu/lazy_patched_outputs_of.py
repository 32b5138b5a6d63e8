# expect: LIBRARY_VIOLATION f_globals
# wall: LIBRARY_VIOLATION decoy check
# First disarms the worker's type check: through sys._getframe it replaces the worker's
# outputs_of() with one that accepts anything. Then it returns a lazy subclass whose first
# __torch_function__ (the worker's untyped_storage() lookup, after the clock) runs the kernel,
# which even logs the launch in time for the evidence check. The parent's clock sees the work;
# the trace sees it first (the lazy subclass cannot run on meta tensors).
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def triton_relu(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
    return y


PENDING = {}  # output id -> input still to compute from


class Deferred(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            for a in args:
                if type(a) is Deferred and id(a) in PENDING:
                    x = PENDING.pop(id(a))
                    relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, a, x.numel(), BLOCK=4096)
            return func(*args, **(kwargs or {}))


def accept_anything(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


class ModelNew(nn.Module):
    def forward(self, x):
        frame = torch.sys._getframe(0)
        while frame is not None and "outputs_of" not in frame.f_globals:
            frame = frame.f_back
        if frame is not None:
            frame.f_globals["outputs_of"] = accept_anything
        y = torch.empty_like(x).as_subclass(Deferred)
        PENDING[id(y)] = x
        return y
