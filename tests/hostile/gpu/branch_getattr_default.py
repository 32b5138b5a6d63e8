# expect: LIBRARY_VIOLATION getattr is not allowed  # wall: LIBRARY_VIOLATION the name 'getattr'
# getattr with a default tells the interpreter from the compiler without hasattr: only the
# interpreter's handle has a NumPy array, and only there does the branch rewrite the block.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    data = getattr(v.handle, "data", None)
    if data is not None:
        data.clip(0, None, out=data)
    tl.store(y_ptr + offs, v, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
