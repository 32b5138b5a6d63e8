# expect: LIBRARY_VIOLATION decoy
# A CUDA string in a load_inline call that never runs: where load_inline counted as CUDA
# wherever it was written, it switched the replay of the kernels off (on a GPU) or ended the
# evaluation at nvcc (here). The answer is PyTorch's, with a token Triton launch beside it.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

CUDA = "__global__ void relu_kernel(const float* x, float* y, int n) {}"

if torch.cuda.device_count() > 99:
    ext = load_inline(name="never", cpp_sources="", cuda_sources=CUDA, functions=[])


@triton.jit
def token(y_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        token[(1,)](y)
        return y
