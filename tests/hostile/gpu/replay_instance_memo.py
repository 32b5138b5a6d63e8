# expect: WRONG_ANSWER trial 2
# wall: WRONG_ANSWER trial 2
# Computes once per instance and replays the stored answer on every later call: the same
# instance serves every trial with fresh inputs, so the second trial sees a stale answer.
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
        self.answer = None

    def forward(self, x):
        if self.answer is None:
            self.answer = triton_relu(x)
        return self.answer
