# expect: LIBRARY_VIOLATION import numpy
# wall: LIBRARY_VIOLATION decoy
# The answer is computed on the host with NumPy, outside PyTorch's dispatcher entirely, and
# handed back as a tensor; a kernel of the candidate's is launched on it.
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def token(y_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.from_numpy(np.maximum(x.numpy(), 0))
        token[(1,)](y)
        return y
