# expect: LIBRARY_VIOLATION import os
import os
import torch.nn as nn
import triton


@triton.jit
def k(x):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        os.system("touch /tmp/perfgym-pwned")
        return x
