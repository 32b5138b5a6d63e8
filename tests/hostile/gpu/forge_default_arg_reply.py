# expect: WRONG_ANSWER wrong answer in trial 1
# wall: WRONG_ANSWER wrong answer in trial 1
# A default argument, evaluated when its def runs at import, takes the worker's pipes from argv
# (torch.sys, torch.os: no banned name) and answers the parent itself: "ready", "built", and for
# the first call an output of ones with every claim a real worker makes (one launch, its own
# kernel wrote the output, one microsecond), then exits. Claims are claims: the parent compares
# the bytes it received against the reference's output.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_os, _sys = torch.os, torch.sys
_json, _struct = _sys.modules["json"], _sys.modules["struct"]


def _read(n):
    data = b""
    while len(data) < n:
        chunk = _os.read(int(_sys.argv[2]), n - len(data))
        if not chunk:
            _os._exit(0)
        data += chunk
    return data


def _command():
    header = _json.loads(_read(_struct.unpack("<Q", _read(8))[0]))
    tensors = []
    for meta in header["tensors"]:
        count = 1
        for d in meta["shape"]:
            count *= d
        raw = bytearray(_read(4 * count))
        tensors.append(torch.frombuffer(raw, dtype=torch.float32).reshape(meta["shape"]))
    return header, tensors


def _reply(header, tensors=()):
    metas = [{"dtype": "float32", "shape": list(t.shape)} for t in tensors]
    data = _json.dumps(dict(header, tensors=metas)).encode()
    blob = (_struct.pack("<Q", len(data)) + data
            + b"".join(t.contiguous().numpy().tobytes() for t in tensors))
    while blob:
        blob = blob[_os.write(int(_sys.argv[3]), blob):]


def _forge():
    _reply({"ready": True, "shrunk": {}})
    while True:
        header, tensors = _command()
        if header["op"] == "build":
            _reply({"built": header["slot"]})
        elif header["op"] == "call":
            out = torch.ones_like(tensors[0])
            _reply({"seconds": 1e-6, "outputs": 1, "launches": 1, "own_kernel_wrote": [True]},
                   [out, *tensors] if header.get("return_inputs") else [out])
            _os._exit(0)
        else:
            _os._exit(0)


def _ignored(forged=_forge()):
    pass


@triton.jit
def k(x_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x
