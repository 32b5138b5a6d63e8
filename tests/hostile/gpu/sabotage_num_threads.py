# expect: LIBRARY_VIOLATION set_num_threads
# wall: LIBRARY_VIOLATION decoy
# torch.set_num_threads(64) on a 2-core machine, to slow PyTorch down where the reference shares
# the process, paired with a cheap answer: PyTorch's relu plus a one-program launch on a scratch
# tensor. The reference's process keeps its own threads; the output is not the kernel's.
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.set_num_threads(64)


@triton.jit
def touch(p_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p_ptr + offs, tl.zeros((BLOCK,), tl.float32))


class ModelNew(nn.Module):
    def forward(self, x):
        touch[(1,)](torch.empty(16), BLOCK=16)
        return torch.relu(x)
