# expect: WRONG_ANSWER tampering
# wall: WRONG_ANSWER tampering
# Reports a time that is a 401-digit integer (valid JSON) through the wrapped send().
import torch
import torch.nn as nn
import triton
import triton.language as tl

worker = torch.sys.modules["__main__"]
real_send = worker.send


def send(fd, header, tensors=()):
    if "seconds" in header:
        header = dict(header, seconds=10 ** 400)
    return real_send(fd, header, tensors)


torch.builtins.setattr(worker, "send", send)

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
        return triton_relu(x)
