# expect: WRONG_ANSWER wrong answer in trial 1
# wall: WRONG_ANSWER wrong answer in trial 1
# task: softmax
# An all-zero softmax on the built-in softmax task (64 x 4093, inputs randn * 4): its largest
# values are far above 1e-4, so zeros fail at KernelBench's tolerance already.
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
