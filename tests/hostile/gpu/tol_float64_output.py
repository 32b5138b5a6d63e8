# expect: WRONG_ANSWER float64
# wall: WRONG_ANSWER float64
# Returns float64: a harness comparing at the candidate's dtype would use float64's 1e-7 or,
# comparing loosely, anything; the dtype is part of the answer.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(tl.float64), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape, dtype=torch.float64)
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
        return y
