# expect: LIBRARY_VIOLATION tl.math.core is not Triton language (no attribute chain
# tl.math is allowed for its functions; its own import of core is not a function. Through it,
# builtins.exec of a module constant rewrites the replayer's perf_counter.
import torch
import torch.nn as nn
import triton
import triton.language as tl

PATCH = tl.constexpr("import time; time.perf_counter = lambda: 1.0")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.math.core.builtins.exec(PATCH.value)
    tl.store(y_ptr + offs, tl.maximum(v, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.device.type == "meta":
            y = torch.empty_like(x)
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
            return y
        return torch.relu(x)
