# expect: LIBRARY_VIOLATION import os  # wall: WRONG_ANSWER wrong answer in trial 1
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
