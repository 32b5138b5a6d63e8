# expect: LIBRARY_VIOLATION torch.compile
# wall: LIBRARY_VIOLATION decoy
# torch.compile instead of a kernel (library code generating the work), with an unused Triton
# kernel defined so that a kernel is present in the source.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass


@torch.compile(backend="eager", dynamic=False)
def relu(x):
    return torch.where(x > 0, x, torch.zeros_like(x))


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
