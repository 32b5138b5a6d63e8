# expect: WRONG_ANSWER trial 2
# Computes once, then replays the stored answer: fresh inputs in every trial catch it.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_saved = {}


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        if "y" not in _saved:
            y = torch.empty_like(x)
            relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
            _saved["y"] = y
        return _saved["y"]
