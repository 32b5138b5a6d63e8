# expect: LIBRARY_VIOLATION the attribute .numpy of a value is not Triton language
# In the candidate's process the interpreted body sees the module's globals, torch among them:
# the block goes through torch.relu on its way to the store (TensorHandle is one of the
# interpreter's own globals, put there too).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    r = torch.relu(torch.from_numpy(v.handle.data)).numpy()
    tl.store(y_ptr + offs, tl.core.tensor(TensorHandle(r, v.handle.dtype), v.type), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
