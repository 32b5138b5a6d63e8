"""A mesh-like sparse matrix: rows of uneven length (a long tail), nonzeros clustered around the
diagonal with some long-range couplings, exactly N*R nonzeros, columns sorted and distinct
within each row.

The structure is drawn from one of STRUCTURES fixed seeds per size and cached, as a real
application reuses its matrix; the values and x are fresh for every evaluation, and the two input
sets of an evaluation usually get different structures."""
from functools import lru_cache

import numpy as np

STRUCTURES = 4


def make_inputs(rng: np.random.Generator, N: int, R: int) -> dict:
    row_ptr, col_idx = _structure(N, R, int(rng.integers(STRUCTURES)))
    return {
        "row_ptr": row_ptr,
        "col_idx": col_idx,
        "vals": rng.uniform(-1.0, 1.0, size=N * R),
        "x": rng.uniform(-1.0, 1.0, size=N),
    }


@lru_cache(maxsize=8)
def _structure(N: int, R: int, which: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([N, R, which])
    nnz = N * R
    # Row lengths: log-normal around R, at most N, summing to exactly nnz.
    weights = rng.lognormal(0.0, 0.6, size=N)
    lengths = np.minimum(np.floor(weights / weights.sum() * nnz).astype(np.int64), N)
    while (short := nnz - int(lengths.sum())) > 0:  # hand the remainder to rows with room
        room = np.nonzero(lengths < N)[0]
        lengths[rng.choice(room, size=min(short, room.size), replace=False)] += 1
    row_ptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(lengths, out=row_ptr[1:])
    rows = np.repeat(np.arange(N, dtype=np.int64), lengths)
    first = row_ptr[:-1][rows]  # index of each nonzero's row start
    rank = np.arange(nnz, dtype=np.int64) - first  # position within its row

    # Columns as a walk of positive gaps (so sorted and distinct): mostly small gaps, and 5% long
    # jumps for the long-range couplings.
    gaps = rng.geometric(0.35, size=nnz).astype(np.int64)
    jump = rng.random(nnz) < 0.05
    gaps[jump] += rng.integers(1, max(2, N // max(R, 1)), size=int(jump.sum()))
    gaps[rank == 0] = 0
    walk = np.cumsum(gaps)
    pos = walk - walk[first]
    span = pos[row_ptr[1:][rows] - 1] + 1  # extent of each nonzero's row
    # Rows whose walk is wider than the matrix are squeezed; floor(pos * s) + rank stays distinct.
    wide = span > N
    if wide.any():
        scale = (N - lengths[rows[wide]]) / np.maximum(span[wide] - 1, 1)
        pos[wide] = np.floor(pos[wide] * scale).astype(np.int64) + rank[wide]
        span[wide] = pos[row_ptr[1:][rows[wide]] - 1] + 1
    start = np.clip(rows - span // 2, 0, N - span)  # centre each row's band on the diagonal
    cols = start + pos
    row_ptr, cols = row_ptr.astype(np.int32), cols.astype(np.int32)
    row_ptr.flags.writeable = cols.flags.writeable = False  # shared between evaluations
    return row_ptr, cols
