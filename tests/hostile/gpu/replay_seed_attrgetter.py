# expect: WRONG_ANSWER wrong answer in trial 1
# wall: WRONG_ANSWER wrong answer in trial 1
# The same precomputation with no banned name (operator.methodcaller("initial_seed")), plus the
# seeds other harnesses fix (KernelBench's 42, 0): it keeps an answer for each and returns the
# one whose replayed input is closest to the real one. None of them is the secret seed.
import operator

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
        self.answers = []
        for seed in (operator.methodcaller("initial_seed")(torch), 42, 0):
            g = torch.Generator()
            g.manual_seed(seed)
            x = torch.randn(16, 16384, generator=g)
            self.answers.append((x, triton_relu(x)))

    def forward(self, x):
        return min(self.answers, key=lambda a: float((a[0] - x).abs().sum()))[1]
