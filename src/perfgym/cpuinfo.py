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
