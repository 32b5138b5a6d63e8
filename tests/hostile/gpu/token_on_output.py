# expect: LIBRARY_VIOLATION decoy
# wall: LIBRARY_VIOLATION decoy
# A token kernel handed the output itself: one program that stores nothing, launched on the
# tensor PyTorch computed.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def token(y_ptr, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        token[(1,)](y, BLOCK=16)
        return y
