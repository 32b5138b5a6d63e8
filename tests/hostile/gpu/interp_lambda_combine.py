# expect: LIBRARY_VIOLATION line 16: lambda is not Triton language
# task: softmax
# A combine function is Python the interpreter calls on NumPy arrays: given as a lambda, its
# body is no @triton.jit function the front end or this check would read.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=-float("inf"))
    e = tl.exp(x - tl.reduce(x, 0, lambda a, b: tl.maximum(a, b)))
    tl.store(y_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=offs < cols)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        softmax_kernel[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
