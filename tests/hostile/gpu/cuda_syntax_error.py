# expect: COMPILE_ERROR
# CUDA that nvcc rejects (no GPU needed to know).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
ext = load_inline(name="broken", cpp_sources="", cuda_sources=cuda_source, functions=[])


class ModelNew(nn.Module):
    def forward(self, x):
        return x
