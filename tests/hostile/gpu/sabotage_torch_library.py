# expect: LIBRARY_VIOLATION torch.library
# wall: WRONG_ANSWER wrong answer in trial 1
# Overrides aten::relu for the CPU with torch.library so that relu returns zeros, and answers
# zeros with its own (cheap) kernel: where the reference shares the process, the two agree. The
# reference runs in a worker of its own, where aten::relu is untouched.
import torch
import torch.nn as nn
import triton
import triton.language as tl

lib = torch.library.Library("aten", "IMPL")
lib.impl("relu", lambda x: torch.zeros_like(x), "CPU")


@triton.jit
def zero_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)


def triton_zeros(x):
    y = torch.empty_like(x)
    zero_kernel[(triton.cdiv(x.numel(), 4096),)](y, x.numel(), BLOCK=4096)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return triton_zeros(x)
