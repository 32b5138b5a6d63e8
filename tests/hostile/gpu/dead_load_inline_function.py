# expect: LIBRARY_VIOLATION decoy
# The same, with the load_inline call in a function nobody calls and the __global__ string in
# a list beside it: no CUDA code ever runs, so the kernels launched must compute the answer.
import torch
import torch.nn as nn
import triton
import triton.language as tl
import torch.utils.cpp_extension as ext

SOURCES = ["__global__ void scale(float* y, int n) { }", "__global__ void relu(float* y) { }"]


def build_unused():
    return ext.load_inline(name="unused", cpp_sources="", cuda_sources=SOURCES[0], functions=[])


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](torch.relu(x), y, x.numel(), BLOCK=1024)
        return y
