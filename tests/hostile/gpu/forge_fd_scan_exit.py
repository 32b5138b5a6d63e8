# expect: RUNTIME_ERROR exited with status 0
# wall: RUNTIME_ERROR exited with status 0
# Without reading argv: tries every fd from 3 to 20 and writes to each one it can a forged
# "ready" reply followed by the header of a forged successful call (and an "OK" verdict line to
# stdout and stderr), then exits with status 0. Only the parent's own pipe is read, and a worker
# that has exited cannot keep the conversation going.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_os = torch.os
_json, _struct = torch.sys.modules["json"], torch.sys.modules["struct"]


def _frame(header):
    data = _json.dumps(header).encode()
    return _struct.pack("<Q", len(data)) + data


FORGED = (_frame({"ready": True, "shrunk": {}, "tensors": []})
          + _frame({"seconds": 1e-7, "outputs": 1, "launches": 1, "own_kernel_wrote": [True],
                    "tensors": [{"dtype": "float32", "shape": [16, 16384]}]}))
for fd in range(3, 21):
    try:
        _os.write(fd, FORGED)
    except OSError:
        pass
for fd in (1, 2):
    _os.write(fd, b'{"status": "OK", "correct": true, "speedup": 100.0}\n')
_os._exit(0)


@triton.jit
def k(x_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x
