# expect: LIBRARY_VIOLATION tl.core is not Triton language (no attribute chain
# Triton's code generator calls a Python callable it reaches through a module attribute when
# every argument is constant, so tl.core.builtins.exec runs this string in whatever compiles or
# interprets the kernel: in the replayer it stops the clock (perf_counter returns 0), and the
# forward answers real calls with PyTorch while showing the tracer an honest kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl

PATCH = tl.constexpr("import time; time.perf_counter = lambda: 0.0")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.core.builtins.exec(PATCH.value)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.device.type == "meta":
            y = torch.empty_like(x)
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
            return y
        return torch.relu(x)
