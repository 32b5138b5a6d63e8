# expect: LIBRARY_VIOLATION assigning to v.handle.data  # wall: LIBRARY_VIOLATION the name 'hasattr'
# hasattr is no call the static rules name. Compiling, a loaded block's handle is an IR value
# with no .data, the branch is constant False and the front end never reads it; interpreted,
# the block is a NumPy array and the branch computes the answer with it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    if hasattr(v.handle, "data"):
        v.handle.data[v.handle.data < 0] = 0
    tl.store(y_ptr + offs, v, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
