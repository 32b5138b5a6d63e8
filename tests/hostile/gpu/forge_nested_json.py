# expect: RUNTIME_ERROR JSON
# wall: RUNTIME_ERROR JSON
# Writes a forged reply header at import: valid JSON, 200 kB (under the 1 MiB header cap),
# nested 100000 arrays deep.
import torch
import torch.nn as nn
import triton

_struct = torch.sys.modules["struct"]
_data = b"[" * 100000 + b"]" * 100000
torch.os.write(int(torch.sys.argv[3]), _struct.pack("<Q", len(_data)) + _data)
torch.os._exit(0)


@triton.jit
def k(x_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x
