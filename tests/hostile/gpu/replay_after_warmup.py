# expect: WRONG_ANSWER timed call
# wall: WRONG_ANSWER timed call
# Honest for the first three calls of an instance (the correctness trials), then replays its
# last answer for everything after (the timed calls), where a harness that times without
# checking would see a replay as the speed of the kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def triton_relu(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls, self.last = 0, None

    def forward(self, x):
        self.calls += 1
        if self.calls > 3:
            return self.last
        self.last = triton_relu(x)
        return self.last
