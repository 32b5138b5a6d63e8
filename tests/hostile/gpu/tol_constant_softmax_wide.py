# expect: WRONG_ANSWER scaled to the output's magnitude
# wall: WRONG_ANSWER scaled to the output's magnitude
# task: wide_softmax
# The uniform answer 1/n for every softmax entry: each row even sums to one, and every entry is
# within 1e-4 of the reference's. Judged at a tolerance scaled to the output's magnitude, it is
# wrong almost everywhere.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_kernel(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), tl.float32) + value, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        fill_kernel[(triton.cdiv(x.numel(), 4096),)](y, x.numel(), 1.0 / x.shape[-1], BLOCK=4096)
        return y
