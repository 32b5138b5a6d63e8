# expect: LIBRARY_VIOLATION triton.knobs is not Triton language (no attribute chain
# A constant condition the front end folds: compiling, triton.knobs.runtime.interpret is
# False, so it reads only the honest branch; interpreted (the CPU's replayer), the other branch
# runs, and there the ReLU is NumPy's (np is in the interpreter's globals), written over the
# kernel's own result.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    if triton.knobs.runtime.interpret:
        v = tl.core.tensor(np.maximum(v.handle.data, 0), v.type)
    tl.store(y_ptr + offs, v, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
