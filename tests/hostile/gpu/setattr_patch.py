# expect: LIBRARY_VIOLATION setattr  # wall: WRONG_ANSWER wrong answer in trial 1
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
