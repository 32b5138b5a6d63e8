# expect: WRONG_ANSWER wrong answer in trial 1
# wall: WRONG_ANSWER wrong answer in trial 1
# The same patch with no banned name: torch.builtins.setattr is an attribute, not the setattr
# the static rules look for. It passes the filter, so the reference's worker is the wall.
import torch
import torch.nn as nn
import triton
import triton.language as tl

for owner, name in ((torch, "relu"), (torch.nn.functional, "relu"), (torch.Tensor, "relu")):
    torch.builtins.setattr(owner, name, lambda x, *a, **k: torch.zeros_like(x))


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
