# expect: LIBRARY_VIOLATION decoy
# wall: LIBRARY_VIOLATION decoy
# The kernel writes the output it was given, honestly; then the output's storage is swapped
# (set_) for the storage of a tensor PyTorch computed: the same tensor object, other bytes.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zero_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        zero_kernel[(triton.cdiv(x.numel(), 1024),)](y, x.numel(), BLOCK=1024)
        computed = torch.nn.functional.relu(x)
        y.set_(computed.untyped_storage(), 0, computed.shape, computed.stride())
        return y
