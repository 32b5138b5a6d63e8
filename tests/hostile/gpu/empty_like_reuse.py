# expect: WRONG_ANSWER wrong answer
# Returns uninitialized memory, hoping the allocator hands back the reference's freed output
# (a known exploit when the reference runs first). The candidate runs first here.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch(y_ptr, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        touch[(1,)](y, BLOCK=16)
        return y
