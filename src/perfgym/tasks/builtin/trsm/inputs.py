"""A well-conditioned lower-triangular L (diagonal in [1, 2), small off-diagonal entries) whose
strict upper triangle is NaN, so a kernel that reads it gets NaN in its answer."""
import numpy as np


def make_inputs(rng: np.random.Generator, N: int, R: int) -> dict:
    L = np.tril(rng.uniform(-1.0, 1.0, size=(N, N)) / max(N, 1) ** 0.5, k=-1)
    L[np.diag_indices(N)] = rng.uniform(1.0, 2.0, size=N)
    L[np.triu_indices(N, k=1)] = np.nan
    return {"L": L, "B": rng.uniform(-1.0, 1.0, size=(N, R))}
