# expect: LIBRARY_VIOLATION Model  # wall: COMPILE_ERROR NameError
import torch.nn as nn
import triton


@triton.jit
def unused(x):
    pass


class ModelNew(Model):
    pass
