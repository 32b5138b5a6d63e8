# expect: LIBRARY_VIOLATION assigning
# wall: LIBRARY_VIOLATION Triton language
# Without a GPU, Triton interprets a kernel's body as Python, so a body can reach a library
# through __import__ and let it compute: in the candidate's own process this kernel's ReLU is
# NumPy's, done on the loaded block's array. The replayer runs a body only after Triton's
# front end has lowered it, and the front end knows no __import__.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    v.handle.data = __import__("numpy").maximum(v.handle.data, 0)
    tl.store(y_ptr + offs, v, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
