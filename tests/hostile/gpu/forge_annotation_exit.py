# expect: RUNTIME_ERROR exited with status 0
# wall: RUNTIME_ERROR exited with status 0
# Forges the verdict at import with no banned name: a string annotation, evaluated by
# typing.get_type_hints, writes a passing verdict and zero-cost timings into its cwd (where older
# harnesses read results back), then exits with status 0 before the worker sends a word. The
# parent takes verdicts from nowhere but its own pipe: a worker that leaves stopped answering.
import typing

import torch
import torch.nn as nn
import triton
import triton.language as tl

FORGED = {"result.json": '{"status": "OK", "correct": true, "speedup": 100.0}',
          "timing.json": '{"new": [1e-07], "ref": [1e-05]}',
          "eval_result.txt": "compiled=True correctness=True runtime=0.0001"}


@triton.jit
def zero_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), tl.float32), mask=offs < n)


def forge(verdict: "[__import__('pathlib').Path(name).write_text(text) for name, text in "
                   "FORGED.items()] and __import__('os')._exit(0)"):
    pass


typing.get_type_hints(forge)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        zero_kernel[(triton.cdiv(x.numel(), 4096),)](y, x.numel(), BLOCK=4096)
        return y
