# expect: WRONG_ANSWER wrong answer in trial 1
# wall: WRONG_ANSWER wrong answer in trial 1
# Returns torch.empty_like(x) straight away while a thread (threading from torch.sys.modules)
# fills it; whatever the allocator left in that memory (perhaps an earlier answer) is what gets
# sent.
import torch
import torch.nn as nn
import triton
import triton.language as tl

threading = torch.sys.modules["threading"]

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def triton_relu(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        threading.Thread(target=lambda: relu_kernel[(triton.cdiv(x.numel(), 4096),)](
            x, y, x.numel(), BLOCK=4096), daemon=True).start()
        return y
