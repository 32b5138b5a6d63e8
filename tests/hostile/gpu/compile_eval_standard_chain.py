# expect: LIBRARY_VIOLATION tl.standard is not Triton language (no attribute chain
# The same door one module further: tl.standard imports core, core imports builtins, and eval
# of a constant string is folded by the front end like any other call on constants. Here it
# makes the whole check process exit 0 where the front end runs (TRITON_INTERPRET=0), which
# the replayer reads as "accepted", before the front end reaches the body's NumPy.
import torch
import torch.nn as nn
import triton
import triton.language as tl

QUIT = tl.constexpr("__import__('os')._exit(0) if __import__('os').environ.get('TRITON_INTERPRET')"
                   " == '0' else 0")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.standard.core.builtins.eval(QUIT.value)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
