# expect: LIBRARY_VIOLATION libdevice.core is not Triton language (no attribute chain
# libdevice's numeric functions are Triton language; the module it imported them through is
# not: libdevice.core.builtins reaches exec.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

PATCH = tl.constexpr("import time; time.perf_counter = lambda: 0.0")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    libdevice.core.builtins.exec(PATCH.value)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
