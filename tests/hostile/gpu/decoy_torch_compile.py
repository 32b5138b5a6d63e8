# expect: LIBRARY_VIOLATION torch.compile
# wall: LIBRARY_VIOLATION decoy
# The answer comes from a torch.compile'd function (on a GPU, Inductor writes Triton kernels
# of its own: not the candidate's); a token kernel of the candidate's runs beside it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def token(y_ptr):
    pass


def relu(x):
    return torch.relu(x)


fast_relu = torch.compile(relu, backend="eager")


class ModelNew(nn.Module):
    def forward(self, x):
        y = fast_relu(x)
        token[(1,)](y)
        return y
