# expect: LIBRARY_VIOLATION decoy check
# wall: LIBRARY_VIOLATION decoy check
# Returns a list subclass whose __iter__ does the work: the worker stops its clock, then unpacks
# the outputs (outputs_of calls __iter__), so the whole kernel runs outside the timed region and
# every call claims almost nothing. The parent's clock spans the whole exchange; before it,
# the trace does: the list's work runs on meta tensors there and fails.
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


class Outputs(list):
    def __init__(self, x, y):
        super().__init__()
        self.pending = (x, y)

    def __iter__(self):
        x, y = self.pending
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
        return iter([y])


class ModelNew(nn.Module):
    def forward(self, x):
        return Outputs(x, torch.empty_like(x))
