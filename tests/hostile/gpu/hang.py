# expect: TIMEOUT
import torch.nn as nn
import triton


@triton.jit
def k(x):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            pass
