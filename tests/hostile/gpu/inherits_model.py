# expect: LIBRARY_VIOLATION Model
import torch.nn as nn
import triton


@triton.jit
def unused(x):
    pass


class ModelNew(Model):
    pass
