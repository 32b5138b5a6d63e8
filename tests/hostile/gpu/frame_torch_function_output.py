# expect: RUNTIME_ERROR not a torch.Tensor
# wall: RUNTIME_ERROR not a torch.Tensor
# Returns its output as a tensor subclass whose __torch_function__ runs when the harness first
# touches it (detach, to, contiguous...): there it would reach the worker's frame and rewrite the
# call's time. The worker accepts nothing but an exact torch.Tensor, before touching it.
import operator

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


local_vars, back = operator.attrgetter("f_locals"), operator.attrgetter("f_back")


class Hooked(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        frame = torch.sys._getframe(1)
        while frame is not None and "seconds" not in local_vars(frame):
            frame = back(frame)
        if frame is not None:
            local_vars(frame)["seconds"] = 1e-7
            torch.ctypes.pythonapi.PyFrame_LocalsToFast(torch.ctypes.py_object(frame),
                                                       torch.ctypes.c_int(0))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, x):
        return triton_relu(x).as_subclass(Hooked)
