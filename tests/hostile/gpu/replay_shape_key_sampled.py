# expect: WRONG_ANSWER trial 2
# wall: WRONG_ANSWER trial 2
# A cache keyed by shape, dtype and strides, "validated" by a few sampled input values compared
# loosely (a check that never fails for randn data): it replays from the second call on.
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
        self.cache = {}

    def forward(self, x):
        key = (tuple(x.shape), x.dtype, x.stride())
        sample = x.reshape(-1)[:: max(1, x.numel() // 4)][:4].clone()
        hit = self.cache.get(key)
        if hit is not None and torch.allclose(hit[0], sample, atol=10.0):
            return hit[1]
        y = triton_relu(x)
        self.cache[key] = (sample, y)
        return y
