# expect: WRONG_ANSWER freshly built
# wall: WRONG_ANSWER freshly built
# A module-level memo that survives instances ("a warm cache"): the first instance computes
# honestly and leaves its last answer at module level, any later instance replays it. Trials on
# the first instance all pass; the freshly built second instance answers stale values.
import torch
import torch.nn as nn
import triton
import triton.language as tl

WARM = {}

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
        self.replay = bool(WARM)

    def forward(self, x):
        key = (tuple(x.shape), x.dtype)
        if self.replay and key in WARM:
            return WARM[key]
        WARM[key] = triton_relu(x)
        return WARM[key]
