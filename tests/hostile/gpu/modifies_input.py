# expect: WRONG_ANSWER inputs
# Writes the result into its input and returns it. If the reference shared that tensor it would
# compute ReLU of the ReLU and agree; with cloned inputs the change is seen.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        relu_inplace[(triton.cdiv(x.numel(), 4096),)](x, x.numel(), BLOCK=4096)
        return x
