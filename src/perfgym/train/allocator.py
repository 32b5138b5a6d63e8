"""Give freed memory back to the system during training.

glibc's malloc serves a large block from the heap once a block of its size was freed (it
raises its mmap threshold as it goes, up to 32 MiB), and a freed heap block stays in the
process. A training step allocates and frees many such blocks, so the trainer's resident
memory kept about 4 GB it no longer used: the 135M multi-turn run peaked at 12.0 GB instead
of 7.8 (docs/training/train.md, "Memory").
A fixed mmap threshold puts every block of 1 MiB or more in its own mapping, returned when
freed. It has a price, so it is asked for (`--low-memory`, which also shrinks TRL's LM-head
tiles: lm_head_tiles.py), not the default: each new
mapping's pages are faulted in and zeroed again. With the flag (and the smaller tiles) the
multi-turn GRPO run's updates took 1.13x as long and the run 1.06x, peaking at 3.9 GB instead
of 11.3 (benchmarks/low_memory_cost.py, one run each); SFT steps took 1.4x as long, 5.4 GB
instead of 7.6 (benchmarks/train_allocator.py, where jemalloc did no better).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
MMAP_THRESHOLD_BYTES = 1 << 20


def return_freed_memory() -> bool:
    """Fix glibc's mmap threshold for this process; False where the C library is not glibc
    (the setting is glibc's) or refused it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018  (glibc only: musl has no such symbol)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
