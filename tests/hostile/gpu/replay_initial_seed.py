# expect: LIBRARY_VIOLATION initial_seed
# wall: WRONG_ANSWER wrong answer in trial 1
# Precomputes the answer in __init__: reads the seed in force (torch.initial_seed()), replays
# get_inputs (torch.randn(16, 16384)) from it and stores the ReLU. Where inputs follow the build
# seed that is the exact answer; here inputs come from a seed of their own, drawn in secret.
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
        g = torch.Generator()
        g.manual_seed(torch.initial_seed())
        self.answer = triton_relu(torch.randn(16, 16384, generator=g))

    def forward(self, x):
        return self.answer
