"""Smaller tiles for TRL's chunked LM head on a CPU.

TRL 1.16 computes the update's per-token log-probabilities through a chunked LM head
(trl/kernels/chunked_logprob.py): tiles of 4,096 tokens x 32,768 vocabulary columns, 512 MB of
float32 each. Without Triton (a CPU), each tile is folded by whole-tile torch operations, each
a temporary of the tile's size, so the head alone took gigabytes at the update's height.
Tiles of 1,024 x 8,192 (32 MB) brought the 135M multi-turn run's first step from 7.8 to
3.6 GB with --low-memory's allocator setting; two steps, 3.9 GB against 11.3 GB without the
flag, the updates 1.13x as long (benchmarks/low_memory_cost.py; docs/training/train.md,
"Memory"). The results are the same sums in
another order; the constants are TRL's own module globals, read at each call.
"""
from __future__ import annotations

TOKENS = 1024
VOCABULARY = 8192


def shrink_lm_head_tiles(tokens: int = TOKENS, vocabulary: int = VOCABULARY) -> bool:
    """Set TRL's tile; False where this TRL has no such constants (another version)."""
    try:
        import trl.kernels.chunked_logprob as chunked
        import trl.trainer.utils as trl_utils
    except ImportError:
        return False
    if not (hasattr(chunked, "TOKEN_CHUNK_SIZE")
            and hasattr(trl_utils, "_CHUNKED_LOGPROB_CHUNK_SIZE")):
        return False
    chunked.TOKEN_CHUNK_SIZE = tokens
    trl_utils._CHUNKED_LOGPROB_CHUNK_SIZE = vocabulary
    return True
