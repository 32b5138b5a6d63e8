# expect: LIBRARY_VIOLATION decoy
# wall: LIBRARY_VIOLATION decoy
# Every output element is written by the candidate's kernel, a plain copy; what it copies is a
# buffer PyTorch computed. Per-element write evidence would pay it; the replay refuses relu.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        computed = torch.relu(x)
        y = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](computed, y, n, BLOCK=1024)
        return y
