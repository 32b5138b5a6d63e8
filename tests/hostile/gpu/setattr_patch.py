# expect: LIBRARY_VIOLATION setattr
# Patches the comparison through setattr, so no attribute assignment appears.
import torch
import torch.nn as nn
import triton

setattr(torch, "allclose", lambda *a, **k: True)


@triton.jit
def k(x):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x
