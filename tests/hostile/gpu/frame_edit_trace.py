# expect: LIBRARY_VIOLATION decoy
# wall: LIBRARY_VIOLATION decoy
# xfail: HOLE: the worker's LaunchLog lives in the candidate's process; reaching send_call's frame
#   (attrgetter("__self__") -> builtins -> sys._getframe) and adding the output's storage to
#   log.pointers makes a torch.relu output count as written by the candidate's kernel: OK
# operator.attrgetter("__self__")(len) is the builtins module; through it sys._getframe, and up
# the frames to the worker's send_call, whose LaunchLog records which storages the candidate's
# kernels were given. It adds its output's storage there and lets PyTorch do the work.
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl

builtins = operator.attrgetter("__self__")(len)
sys = operator.attrgetter("__import__")(builtins)("sys")
back, code_name, local_vars = (operator.attrgetter("f_back"), operator.attrgetter("f_code.co_name"),
                               operator.attrgetter("f_locals"))


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        frame = sys._getframe(0)
        while frame is not None and code_name(frame) != "send_call":
            frame = back(frame)
        if frame is not None:
            local_vars(frame)["log"].pointers.add(y.untyped_storage().data_ptr())
        return y
