# expect: WRONG_ANSWER bfloat16
# wall: WRONG_ANSWER bfloat16
# Returns bfloat16 (half the bytes to write, and a 1e-2 tolerance if judged at its own dtype).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(tl.bfloat16), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape, dtype=torch.bfloat16)
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
        return y
