"""What /proc/cpuinfo says about this CPU: its ISA extensions of interest. A module of its own
so the builder (which tells a model the ISA) and the machine probe (which builds with the
builder) both read it without importing each other."""
from __future__ import annotations

from functools import lru_cache

_ISA_OF_INTEREST = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw",
                    "avx512vl", "avx512_fp16", "avx512_bf16", "amx_tile", "asimd", "sve", "sve2")


@lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    info.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return info


def isa_flags() -> list[str]:
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return [f for f in _ISA_OF_INTEREST if f in flags]


BF16_CHOICES = ("auto", "on", "off")


def native_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (AVX512_BF16 or AMX)."""
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def use_bf16(choice: bool | str) -> bool:
    """Whether a training update runs in bf16 autocast: "on"/True, "off"/False, or "auto":
    on where the hardware computes bf16 (a CUDA device that supports it; a CPU with
    AVX512_BF16 or AMX). Elsewhere PyTorch emulates bf16 on a CPU, far slower than FP32: on a
    2-core AMD EPYC with AVX2 only, a forward and backward of the default model over 4 x 600
    tokens took 28 s in FP32 and was stopped after 9 minutes in bf16; with AVX512_BF16, bf16
    was 2x faster than FP32 (benchmarks/update_speed.py)."""
    if isinstance(choice, bool):
        return choice
    if choice not in BF16_CHOICES:
        raise ValueError(f"bf16 must be one of {', '.join(BF16_CHOICES)}, not {choice!r}")
    if choice != "auto":
        return choice == "on"
    try:
        import torch
        if torch.cuda.is_available():
            return bool(torch.cuda.is_bf16_supported())
    except ImportError:
        pass
    return native_bf16()
