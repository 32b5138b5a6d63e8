# expect: WRONG_ANSWER float16
# wall: WRONG_ANSWER float16
# Computes and returns half precision, hoping to be judged at half precision's tolerance (1e-2)
# instead of float32's. Outputs are judged at the reference's dtype; a different one is wrong.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(tl.float16), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape, dtype=torch.float16)
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
        return y
