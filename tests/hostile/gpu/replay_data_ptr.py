# expect: WRONG_ANSWER trial 2
# wall: WRONG_ANSWER trial 2
# A cache keyed by data_ptr plus a few sampled values, the way CUDA-graph code keys on its
# static input buffer: the input is copied into one persistent staging buffer (so the pointer
# always matches) and the samples are compared loosely (so they always match): from the second
# call on it replays. (Keyed on the worker's own input pointers it would just miss: those
# buffers are fresh.)
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
        self.staging = None
        self.cache = {}

    def forward(self, x):
        if self.staging is None or self.staging.shape != x.shape:
            self.staging = torch.empty_like(x)
        self.staging.copy_(x)
        key = self.staging.data_ptr()
        samples = self.staging.reshape(-1)[:8].clone()
        hit = self.cache.get(key)
        if hit is not None and torch.allclose(hit[0], samples, atol=100.0):
            return hit[1]
        y = triton_relu(self.staging)
        self.cache[key] = (samples, y)
        return y
