# expect: LIBRARY_VIOLATION attribute __import__ is not allowed
# wall: LIBRARY_VIOLATION tl.core is not Triton language
# The replayer's clock, through the builtins' own __import__ and setattr: time.perf_counter
# becomes float(), always 0.0, so the replayed kernels cost nothing and the forward's PyTorch
# answers are not charged their time.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.core.builtins.setattr(tl.core.builtins.__import__("time"), "perf_counter",
                             tl.core.builtins.float)
    tl.store(y_ptr + offs, tl.maximum(v, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.device.type == "meta":
            y = torch.empty_like(x)
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
            return y
        return torch.relu(x)
