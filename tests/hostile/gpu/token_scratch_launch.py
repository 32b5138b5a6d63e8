# expect: LIBRARY_VIOLATION decoy
# wall: LIBRARY_VIOLATION decoy
# A token kernel: one program on a one-element scratch tensor, so the launch count is not zero,
# while PyTorch computes the output.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def token(p_ptr):
    tl.store(p_ptr, 1.0)


class ModelNew(nn.Module):
    def forward(self, x):
        token[(1,)](torch.empty(1))
        return torch.clamp_min(x, 0.0)
