# expect: LIBRARY_VIOLATION decoy
# wall: LIBRARY_VIOLATION decoy
# The PyTorch call hides inside a torch.autograd.Function's forward, one level below
# ModelNew.forward, and the kernel launched beside it does nothing.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def token(y_ptr):
    pass


class Hidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        return grad


class ModelNew(nn.Module):
    def forward(self, x):
        y = Hidden.apply(x)
        token[(1,)](y)
        return y
