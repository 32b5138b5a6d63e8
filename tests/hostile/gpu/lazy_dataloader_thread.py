# expect: WRONG_ANSWER wrong answer in trial 1
# wall: WRONG_ANSWER wrong answer in trial 1
# Returns its output at once and lets a background thread (threading, reached as
# torch.utils.data.dataloader.threading: no banned import) run the kernel into it a moment
# later, like asynchronous GPU work the timer never waits for. The bytes the parent receives
# are the bytes that were there when forward returned.
import torch
import torch.nn as nn
import torch.utils.data.dataloader
import triton
import triton.language as tl

threading = torch.utils.data.dataloader.threading

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def triton_relu(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
    return y


def fill(x, y):
    relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.zeros_like(x)
        threading.Timer(0.05, fill, args=(x, y)).start()
        return y
