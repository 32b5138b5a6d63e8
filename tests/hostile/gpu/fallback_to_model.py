# expect: LIBRARY_VIOLATION Model  # wall: RUNTIME_ERROR NameError
# Falls back to the reference whenever its kernel "fails".
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            raise RuntimeError("kernel failed")
        except RuntimeError:
            return Model()(x)
