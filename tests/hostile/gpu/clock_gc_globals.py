# expect: LIBRARY_VIOLATION import gc
# wall: WRONG_ANSWER tampering
# Finds the worker's globals with the garbage collector (the dict that holds send_call) and
# replaces its clock with one that runs a hundred times slow, then does the real work.
import gc

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


class SlowClock:
    def __init__(self, real):
        self.real = real

    def perf_counter(self):
        return self.real() / 100


class ModelNew(nn.Module):
    def forward(self, x):
        for obj in gc.get_objects():
            if isinstance(obj, dict) and "send_call" in obj and "time" in obj:
                if not isinstance(obj["time"], SlowClock):
                    obj["time"] = SlowClock(obj["time"].perf_counter)
        return triton_relu(x)
