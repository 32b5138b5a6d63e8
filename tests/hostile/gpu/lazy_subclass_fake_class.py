# expect: RUNTIME_ERROR not a torch.Tensor
# wall: RUNTIME_ERROR not a torch.Tensor
# A lazy subclass that also lies about its class: a __class__ property says torch.Tensor, so
# isinstance() and x.__class__ checks pass. type() is not fooled.
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
    @property
    def __class__(self):
        return torch.Tensor

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            for a in args:
                if type(a) is Deferred and id(a) in PENDING:
                    x = PENDING.pop(id(a))
                    relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, a, x.numel(), BLOCK=4096)
            return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x).as_subclass(Deferred)
        PENDING[id(y)] = x
        return (y,)
