# expect: LIBRARY_VIOLATION assigning  # wall: WRONG_ANSWER wrong answer in trial 1
# Makes synchronize a no-op so the timer stops before the kernel finishes.
import torch
import torch.nn as nn
import triton

torch.cuda.synchronize = lambda *args: None


@triton.jit
def k(x):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x
