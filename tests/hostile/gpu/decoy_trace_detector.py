# expect: LIBRARY_VIOLATION decoy
# wall: LIBRARY_VIOLATION decoy
# Knows it is traced (its input has no values: the meta device) and launches a kernel then;
# on real inputs it lets PyTorch answer. Its kernel writes a constant, so the replay of what it
# showed gives a wrong answer.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def half_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 0.5, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.device.type == "meta":
            y = torch.empty_like(x)
            half_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
            return y
        y = torch.relu(x)
        half_kernel[(1,)](x, torch.empty(0), 0, BLOCK=16)
        return y
