# expect: WRONG_ANSWER wrong answer in trial 1
# wall: WRONG_ANSWER wrong answer in trial 1
# Returns zeros (cheap) and, after each call, overwrites the output files it saved earlier in its
# cwd with the right answer (computed by PyTorch), the way a harness that reloads saved outputs
# would be fooled. Outputs travel over the parent's pipe, so saved files mean nothing.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zero_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        zero_kernel[(triton.cdiv(x.numel(), 4096),)](y, x.numel(), BLOCK=4096)
        torch.save(y, "output.pt")
        torch.save(torch.relu(x), "output.pt")  # "fix" the saved output after the fact
        torch.save({"correct": True, "max_diff": 0.0}, "correctness.pt")
        return y
