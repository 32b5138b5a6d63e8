import numpy as np
import scipy.linalg


def reference(L, B, **_):
    return scipy.linalg.solve_triangular(np.tril(np.nan_to_num(L)), B, lower=True)
