# expect: WRONG_ANSWER scaled to the output's magnitude
# wall: WRONG_ANSWER scaled to the output's magnitude
# task: wide_softmax
# An all-zero softmax over 32768 columns of small inputs: every value is below 1e-4, so zeros
# pass atol = rtol = 1e-4. The tolerance is scaled to the output's magnitude there.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zero_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        zero_kernel[(triton.cdiv(x.numel(), 4096),)](y, x.numel(), BLOCK=4096)
        return y
