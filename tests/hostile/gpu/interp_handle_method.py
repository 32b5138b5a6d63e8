# expect: LIBRARY_VIOLATION the attribute .handle of a value is not Triton language
# No name of NumPy's at all: the interpreter's block is a NumPy array behind .handle.data, and
# its own method clips it in place.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    v.handle.data.clip(0, None, out=v.handle.data)
    tl.store(y_ptr + offs, v, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
