# expect: LIBRARY_VIOLATION attribute  # wall: WRONG_ANSWER wrong answer in trial 1
# Reaches builtins (and from there anything) through object internals.
import torch.nn as nn
import triton


@triton.jit
def k(x):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        for cls in ().__class__.__bases__[0].__subclasses__():
            pass
        return x
