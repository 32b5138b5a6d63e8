# expect: LIBRARY_VIOLATION triton.runtime is not Triton language (no attribute chain
# triton itself is imported by the kernel module; triton.runtime.build imports os, and os.system
# of a constant string is a call the front end folds (here: a file written by the checker).
import torch
import torch.nn as nn
import triton
import triton.language as tl

MARK = tl.constexpr("touch /tmp/perfgym-pwned")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    triton.runtime.build.os.system(MARK.value)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
