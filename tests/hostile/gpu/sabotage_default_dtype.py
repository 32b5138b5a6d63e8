# expect: LIBRARY_VIOLATION set_default_dtype
# wall: WRONG_ANSWER float16
# torch.set_default_dtype(torch.half): where the reference shares the process its get_inputs
# makes half inputs and its outputs are half, so a cheap half answer matches them. Here the
# reference keeps float32, and the output must keep the reference's dtype.
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.set_default_dtype(torch.half)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape)  # the default dtype: half
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
        return y
