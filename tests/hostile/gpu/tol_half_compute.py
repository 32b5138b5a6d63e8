# expect: WRONG_ANSWER wrong answer in trial 1
# wall: WRONG_ANSWER wrong answer in trial 1
# Keeps the float32 dtype but computes through half precision inside the kernel (the value
# rounded to 11 bits): judged at float32's tolerance, the rounding is wrong.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float16)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
        return y
