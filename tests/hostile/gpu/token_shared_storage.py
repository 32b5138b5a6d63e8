# expect: LIBRARY_VIOLATION decoy
# wall: LIBRARY_VIOLATION decoy
# One buffer, one element more than the output: a one-element kernel writes the extra element,
# and PyTorch writes the ReLU into a view of the rest, which is returned.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def guard(p_ptr):
    tl.store(p_ptr, 0.0)


class ModelNew(nn.Module):
    def forward(self, x):
        buf = torch.empty(x.numel() + 1)
        guard[(1,)](buf)
        y = buf[1:].view(x.shape)
        torch.clamp_min(x, 0.0, out=y)
        return y
