# expect: LIBRARY_VIOLATION the name 'np' is not Triton language
# Never imported, yet there: Triton's interpreter puts its own module's globals (np among
# them) into the kernel's. The block is loaded, handed to NumPy, and stored back.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    np.maximum(v.handle.data, 0, out=v.handle.data)
    tl.store(y_ptr + offs, v, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
