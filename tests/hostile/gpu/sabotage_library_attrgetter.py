# expect: WRONG_ANSWER wrong answer in trial 1
# wall: WRONG_ANSWER wrong answer in trial 1
# The same aten::relu override with no banned name (operator.attrgetter("library")(torch)), so
# it passes the static filter: its zeros must then be caught by the reference's own worker.
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl

library = operator.attrgetter("library")(torch)
lib = library.Library("aten", "IMPL")
lib.impl("relu", lambda x: torch.zeros_like(x), "CPU")
lib.impl("clamp_min", lambda x, m: torch.zeros_like(x), "CPU")


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
