# expect: LIBRARY_VIOLATION decoy
# wall: LIBRARY_VIOLATION decoy
# Runs the real kernel, on a scratch copy, so launch counts and timings look right, and returns
# PyTorch's answer computed beside it.
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def triton_relu(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        triton_relu(x[:1].clone())
        return torch.maximum(x, torch.zeros_like(x))
