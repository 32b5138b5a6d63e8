# expect: COMPILE_ERROR (no message)
# wall: COMPILE_ERROR (no message)
# Writes a forged reply to its reply pipe at import: an error with an empty message. A real
# worker never sends one (it writes "Type: message"); a forged one must still end in a verdict.
import torch
import torch.nn as nn
import triton

_json, _struct = torch.sys.modules["json"], torch.sys.modules["struct"]
_data = _json.dumps({"error": "", "stage": "import", "tensors": []}).encode()
torch.os.write(int(torch.sys.argv[3]), _struct.pack("<Q", len(_data)) + _data)


@triton.jit
def k(x_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x
