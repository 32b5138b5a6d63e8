# expect: LIBRARY_VIOLATION line 18: tl.core is not Triton language
# The front end reads only the branch a constexpr takes. The candidate's launches set DEBUG
# (a constexpr) to 0, which is what the replayer's check sees; the branch it never reads
# calls exec all the same, and every branch is read here.
import torch
import torch.nn as nn
import triton
import triton.language as tl

PATCH = tl.constexpr("import time; time.perf_counter = lambda: 0.0")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, DEBUG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    if DEBUG == 1:
        tl.core.builtins.exec(PATCH.value)
    tl.store(y_ptr + offs, tl.maximum(v, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024, DEBUG=0)
        return y
