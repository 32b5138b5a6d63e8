import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_bias_gelu_kernel(x_ptr, s_ptr, b_ptr, y_ptr, n, features, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    f = offs % features
    v = tl.load(x_ptr + offs, mask=mask) * tl.load(s_ptr + f, mask=mask) + tl.load(b_ptr + f,
                                                                                   mask=mask)
    y = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))  # exact gelu, as PyTorch's default
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        scale_bias_gelu_kernel[(triton.cdiv(n, 2048),)](x, self.scale, self.bias, y, n,
                                                        x.shape[1], BLOCK=2048)
        return y
