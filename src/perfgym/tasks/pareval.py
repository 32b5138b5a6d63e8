"""Import ParEval ("Can Large Language Models Write Parallel Code?", HPDC 2024) as perfgym tasks.

`import_pareval(checkout, out)` reads a local ParEval checkout at run time (nothing of ParEval
ships with perfgym) and writes one task directory per problem and prompt model:
`out/serial/<problem>/` and `out/omp/<problem>/`, each with ParEval's prompt as the description,
ParEval's own serial solution (`correct...` in the problem's baseline.hpp, renamed to the entry)
as the baseline every speedup is measured against, and a NumPy reference of ours. `out/import.json`
lists what was imported and what was skipped and why.

A problem is imported when perfgym can state its signature (std::vector of numbers, bool or
complex; sizes; floating scalars) and when RECIPES below holds our translation: array shapes
and roles, input ranges (ParEval's driver's), sizes (the driver's, capped), and the reference.
Integer scalars that are not lengths (a source vertex, a search target, k) are given as sizes:
they are fixed per size set. Tolerances are the driver's absolute ones (`1e-4` in its validate)
plus a relative one, because perfgym checks every size it times, not ParEval's 1024 elements.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .signature import C_TYPES, SignatureError, parse_signature
from .spec import TaskError

MODELS = {"serial": "serial", "omp": "omp"}  # directory name -> ParEval's parallelism_model


@dataclass(frozen=True)
class Recipe:
    """Our translation of one ParEval problem."""

    shapes: dict[str, list[str]]  # every array parameter (and `result` for a return value)
    sizes: Callable[[int], dict[str, int]]  # ParEval's problem size -> our default size
    train: list[dict[str, int]]
    heldout: list[dict[str, int]]
    reference: str  # a NumPy expression, or the source of reference.py (starts with "def ")
    flops: str
    bytes: str
    ranges: dict[str, tuple] = field(default_factory=dict)  # array -> (low, high)
    inout: tuple[str, ...] = ()  # non-const vectors that hold the input on entry
    zero: tuple[str, ...] = ()  # outputs the driver zeroes before the call
    scalars: dict[str, float] = field(default_factory=dict)
    inputs: str | None = None  # source of inputs.py for structured inputs
    # how inputs are perturbed between timed calls when not "element": "none" for inputs a
    # random element change would make ill-posed, "diagonal" for the dominant matrices
    perturb: dict[str, str] = field(default_factory=dict)
    rtol: float = 1e-9
    scale: str = "element"
    note: str = ""  # why our inputs differ from the driver's, shown in the description


# problems we do not translate, and why
UNTRANSLATED = {
    "10_geometry_convex_hull": "the output's length depends on the input (the hull's points); "
                               "a perfgym output has a shape fixed by the sizes",
}


def _cap(limit: int, name: str = "N") -> Callable[[int], dict[str, int]]:
    return lambda p: {name: min(p, limit)}


_GRAPH_INPUTS = '''import numpy as np


def make_inputs(rng, N, **_):
    """A symmetric 0/1 adjacency matrix, no self loops, about EDGES edges per vertex."""
    upper = np.triu(rng.random((N, N)) < EDGES / max(N, 1), 1)
    A = (upper | upper.T).astype(np.int32)
    return {"A": A}
'''

_CONNECTED_INPUTS = '''import numpy as np


def make_inputs(rng, N, **_):
    """A connected undirected graph: a random tree plus about one extra edge per vertex."""
    A = np.zeros((N, N), dtype=np.int32)
    for v in range(1, N):
        u = int(rng.integers(0, v))
        A[u, v] = A[v, u] = 1
    extra = rng.integers(0, N, size=(N, 2))
    A[extra[:, 0], extra[:, 1]] = 1
    A[extra[:, 1], extra[:, 0]] = 1
    np.fill_diagonal(A, 0)
    return {"A": A}
'''

_COMPONENTS = '''import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components


def labels(A):
    return connected_components(csr_matrix(A == 1), directed=False)
'''

_DOMINANT = '''import numpy as np


def make_inputs(rng, N, **_):
    """ParEval's uniform [-10, 10) matrix made diagonally dominant, so elimination without
    pivoting (ParEval's own solution) is stable and every correct order of operations agrees."""
    A = rng.uniform(-10.0, 10.0, size=(N, N)) + 10.0 * N * np.eye(N)
    out = {"A": A}
    if WITH_B:
        out["b"] = rng.uniform(-10.0, 10.0, size=N)
    return out
'''

_STENCIL_2D = '''import numpy as np


def neighbours(grid, offsets):
    """Sum of grid shifted by each (di, dj), reading 0 outside it."""
    n = grid.shape[0]
    p = np.pad(grid.astype(np.int64 if grid.dtype.kind == "i" else np.float64), 1)
    return sum(p[1 + di:1 + di + n, 1 + dj:1 + dj + n] for di, dj in offsets)


CROSS = [(-1, 0), (1, 0), (0, -1), (0, 1)]
RING = CROSS + [(-1, -1), (-1, 1), (1, -1), (1, 1)]
'''

_COO_INPUTS = '''import numpy as np

COO = np.dtype([("row", np.uint64), ("column", np.uint64), ("value", np.float64)], align=True)


def coo(rng, rows, columns, count, dominant=False):
    """`count` entries at distinct positions sorted by (row, column), values in [-1, 1) (or
    [-10, 10) with a dominant diagonal first: every diagonal entry is present)."""
    count = min(count, rows * columns)
    if dominant:
        diagonal = np.arange(rows) * columns + np.arange(rows)
        others = np.setdiff1d(np.arange(rows * columns), diagonal)
        flat = np.concatenate([diagonal, rng.choice(others, count - rows, replace=False)])
    else:
        flat = rng.choice(rows * columns, count, replace=False)
    flat = np.sort(flat)
    a = np.zeros(count, COO)
    a["row"], a["column"] = flat // columns, flat % columns
    a["value"] = rng.uniform(-10.0, 10.0, count) if dominant else rng.uniform(-1.0, 1.0, count)
    if dominant:
        on_diagonal = a["row"] == a["column"]
        a["value"][on_diagonal] = 10.0 * rows + rng.uniform(0.0, 10.0, rows)
    return a
'''

_COO_DENSE = '''import numpy as np


def dense(a, rows, columns, add=False):
    """The COO entries as a dense matrix: repeated positions added, or the last one kept."""
    m = np.zeros((rows, columns))
    r, c = a["row"].astype(np.int64), a["column"].astype(np.int64)
    if add:
        np.add.at(m, (r, c), a["value"])
    else:
        m[r, c] = a["value"]
    return m
'''

_SQUARE = [{"N": 1}, {"N": 2}, {"N": 97}]

RECIPES: dict[str, Recipe] = {
    "00_dense_la_lu_decomp": Recipe(
        shapes={"A": ["N", "N"]}, inout=("A",), sizes=_cap(256),
        train=[{"N": 256}, {"N": 255}], heldout=[{"N": 1}, {"N": 97}],
        ranges={"A": (0.0, 10.0)}, perturb={"A": "diagonal"},
        inputs=_DOMINANT.replace("WITH_B", "False"),
        reference="def reference(A, N, **_):\n    A = A.copy()\n    for k in range(N - 1):\n"
                  "        A[k + 1:, k] /= A[k, k]\n"
                  "        A[k + 1:, k + 1:] -= np.outer(A[k + 1:, k], A[k, k + 1:])\n"
                  "    return A\n",
        flops="2*N*N*N/3", bytes="16*N*N", rtol=1e-9,
        note="A is made diagonally dominant (ParEval: uniform [-10, 10)) so that elimination "
             "without pivoting is well posed"),
    "01_dense_la_solve": Recipe(
        shapes={"A": ["N", "N"], "b": ["N"], "x": ["N"]}, sizes=_cap(256),
        train=[{"N": 256}, {"N": 255}], heldout=[{"N": 1}, {"N": 97}],
        ranges={"A": (0.0, 10.0), "b": (-10.0, 10.0)}, perturb={"A": "diagonal"},
        inputs=_DOMINANT.replace("WITH_B", "True"), reference="np.linalg.solve(A, b)",
        flops="2*N*N*N/3", bytes="8*N*N", rtol=1e-9,
        note="A is made diagonally dominant (ParEval: uniform [-10, 10))"),
    "02_dense_la_gemm": Recipe(
        shapes={"A": ["M", "K"], "B": ["K", "N"], "C": ["M", "N"]}, zero=("C",),
        sizes=lambda p: {"M": min(p, 512), "K": min(p, 512) // 4, "N": min(p, 512) // 2},
        train=[{"M": 512, "K": 128, "N": 256}, {"M": 255, "K": 61, "N": 127}],
        heldout=[{"M": 1, "K": 1, "N": 1}, {"M": 97, "K": 33, "N": 50}],
        reference="A @ B", flops="2*M*N*K", bytes="8*(M*K + K*N + M*N)", rtol=1e-9),
    "03_dense_la_axpy": Recipe(
        shapes={"x": ["N"], "y": ["N"], "z": ["N"]}, sizes=_cap(1 << 20), scalars={"alpha": 2.0},
        train=[{"N": 1 << 20}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        reference="alpha * x + y", flops="2*N", bytes="24*N"),
    "04_dense_la_gemv": Recipe(
        shapes={"A": ["M", "N"], "x": ["N"], "y": ["M"]},
        sizes=lambda p: {"M": min(p, 2048) // 2, "N": min(p, 2048)},
        train=[{"M": 1024, "N": 2048}, {"M": 1023, "N": 2047}],
        heldout=[{"M": 1, "N": 1}, {"M": 97, "N": 13}],
        ranges={"A": (-10.0, 10.0), "x": (-10.0, 10.0)}, reference="A @ x",
        flops="2*M*N", bytes="8*(M*N + M + N)"),
    "05_fft_inverse_fft": Recipe(
        shapes={"x": ["N"]}, inout=("x",), sizes=_cap(1 << 16),
        train=[{"N": 1 << 16}, {"N": 1 << 10}], heldout=[{"N": 2}, {"N": 1 << 17}],
        reference="np.fft.ifft(x)", flops="5*N*16", bytes="32*N"),
    "06_fft_dft": Recipe(
        shapes={"x": ["N"], "output": ["N"]}, sizes=_cap(2048),
        train=[{"N": 2048}, {"N": 2047}], heldout=[{"N": 1}, {"N": 97}],
        reference="np.fft.fft(x)", flops="8*N*N", bytes="24*N"),
    "07_fft_fft_conjugate": Recipe(
        shapes={"x": ["N"]}, inout=("x",), sizes=_cap(1 << 16),
        train=[{"N": 1 << 16}, {"N": 1 << 10}], heldout=[{"N": 2}, {"N": 1 << 17}],
        reference="np.conj(np.fft.fft(x))", flops="5*N*16", bytes="32*N"),
    "08_fft_split_fft": Recipe(
        shapes={"x": ["N"], "r": ["N"], "i": ["N"]}, sizes=_cap(1 << 16),
        train=[{"N": 1 << 16}, {"N": 1 << 10}], heldout=[{"N": 2}, {"N": 1 << 17}],
        reference="(np.fft.fft(x).real, np.fft.fft(x).imag)", flops="5*N*16", bytes="32*N"),
    "09_fft_fft_out_of_place": Recipe(
        shapes={"x": ["N"], "output": ["N"]}, sizes=_cap(1 << 16),
        train=[{"N": 1 << 16}, {"N": 1 << 10}], heldout=[{"N": 2}, {"N": 1 << 17}],
        reference="np.fft.fft(x)", flops="5*N*16", bytes="32*N"),
    "11_geometry_convex_hull_perimeter": Recipe(
        shapes={"points": ["N"], "result": []}, sizes=_cap(1 << 14),
        train=[{"N": 1 << 14}, {"N": 9973}], heldout=[{"N": 3}, {"N": 97}],
        ranges={"points": (-1000.0, 1000.0)}, perturb={"points": "none"},
        reference="from scipy.spatial import ConvexHull\n\n\n"
                  "def reference(points, **_):\n"
                  "    # in two dimensions a hull's `area` is its perimeter\n"
                  "    return ConvexHull(np.stack([points['x'], points['y']], 1)).area\n",
        flops="N*14", bytes="16*N"),
    "12_geometry_smallest_triangle": Recipe(
        shapes={"points": ["N"], "result": []}, sizes=_cap(256),
        train=[{"N": 256}, {"N": 251}], heldout=[{"N": 3}, {"N": 17}],
        ranges={"points": (-1000.0, 1000.0)}, perturb={"points": "none"},
        reference="def reference(points, N, **_):\n"
                  "    x, y = points['x'], points['y']\n"
                  "    best = np.inf\n"
                  "    for i in range(N - 2):  # all triangles (i, j, k) with i < j < k\n"
                  "        j, k = np.triu_indices(N - i - 1, 1)\n"
                  "        j, k = j + i + 1, k + i + 1\n"
                  "        area = 0.5 * np.abs(x[i] * (y[j] - y[k]) + x[j] * (y[k] - y[i])\n"
                  "                            + x[k] * (y[i] - y[j]))\n"
                  "        best = min(best, area.min())\n"
                  "    return best\n",
        flops="N*N*N", bytes="16*N"),
    "13_geometry_closest_pair_2d": Recipe(
        shapes={"points": ["N"], "result": []}, sizes=_cap(1 << 12),
        train=[{"N": 1 << 12}, {"N": 4093}], heldout=[{"N": 2}, {"N": 97}],
        ranges={"points": (-1000.0, 1000.0)}, perturb={"points": "none"},
        reference="from scipy.spatial.distance import pdist\n\n\n"
                  "def reference(points, **_):\n"
                  "    return pdist(np.stack([points['x'], points['y']], 1)).min()\n",
        flops="4*N*N", bytes="16*N"),
    "14_geometry_closest_pair_1d": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=_cap(1 << 13),
        train=[{"N": 1 << 13}, {"N": 4099}], heldout=[{"N": 2}, {"N": 97}],
        ranges={"x": (-1000.0, 1000.0)}, reference="np.diff(np.sort(x)).min()",
        flops="3*N*N/2", bytes="8*N"),
    "15_graph_edge_count": Recipe(
        shapes={"A": ["N", "N"], "result": []}, sizes=_cap(2048),
        train=[{"N": 2048}, {"N": 2047}], heldout=_SQUARE, ranges={"A": (0, 2)},
        reference="np.int32(np.count_nonzero(A == 1))", flops="N*N", bytes="4*N*N"),
    "16_graph_largest_component": Recipe(
        shapes={"A": ["N", "N"], "result": []}, sizes=_cap(1024),
        train=[{"N": 1024}, {"N": 1021}], heldout=_SQUARE, ranges={"A": (0, 2)},
        inputs=_GRAPH_INPUTS.replace("EDGES", "1.5"), perturb={"A": "none"},
        reference=_COMPONENTS + "\n\ndef reference(A, **_):\n    _, label = labels(A)\n"
                                "    return np.int32(np.bincount(label).max())\n",
        flops="N*N", bytes="4*N*N",
        note="a vertex has 1.5 neighbours on average (ParEval: half of all pairs, so one "
             "component)"),
    "17_graph_highest_degree": Recipe(
        shapes={"A": ["N", "N"], "result": []}, sizes=_cap(2048),
        train=[{"N": 2048}, {"N": 2047}], heldout=_SQUARE, ranges={"A": (0, 2)},
        inputs=_GRAPH_INPUTS.replace("EDGES", "N / 2"), perturb={"A": "none"},
        reference="np.int32(A.sum(axis=1).max())", flops="N*N", bytes="4*N*N"),
    "18_graph_count_components": Recipe(
        shapes={"A": ["N", "N"], "result": []}, sizes=_cap(1024),
        train=[{"N": 1024}, {"N": 1021}], heldout=_SQUARE, ranges={"A": (0, 2)},
        inputs=_GRAPH_INPUTS.replace("EDGES", "1.5"), perturb={"A": "none"},
        reference=_COMPONENTS + "\n\ndef reference(A, **_):\n    count, _ = labels(A)\n"
                                "    return np.int32(count)\n",
        flops="N*N", bytes="4*N*N",
        note="a vertex has 1.5 neighbours on average (ParEval: half of all pairs, so one "
             "component)"),
    "19_graph_shortest_path": Recipe(
        shapes={"A": ["N", "N"], "result": []},
        sizes=lambda p: {"N": min(p, 1024), "source": 3, "dest": min(p, 1024) - 2},
        train=[{"N": 1024, "source": 3, "dest": 1022}, {"N": 1021, "source": 700, "dest": 5}],
        heldout=[{"N": 2, "source": 1, "dest": 1}, {"N": 97, "source": 96, "dest": 1}],
        ranges={"A": (0, 2)}, inputs=_CONNECTED_INPUTS, perturb={"A": "none"},
        reference="from scipy.sparse import csr_matrix\n"
                  "from scipy.sparse.csgraph import shortest_path\n\n\n"
                  "def reference(A, source, dest, **_):\n"
                  "    d = shortest_path(csr_matrix(A == 1), unweighted=True, indices=source)\n"
                  "    return np.int32(d[dest])\n",
        flops="N*N", bytes="4*N*N",
        note="the graph is a random tree plus about one extra edge per vertex"),
    "20_histogram_pixel_histogram": Recipe(
        shapes={"image": ["N"], "bins": ["256"]}, zero=("bins",), sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"image": (0, 255)},
        reference="np.bincount(image, minlength=256).astype(np.uint64)", flops="N",
        bytes="4*N"),
    "21_histogram_bin_0-100": Recipe(
        shapes={"x": ["N"], "bins": ["10"]}, zero=("bins",), sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (0.0, 100.0)},
        reference="np.bincount((x // 10).astype(np.int64), minlength=10).astype(np.uint64)",
        flops="N", bytes="8*N"),
    "24_histogram_count_quartile": Recipe(
        shapes={"x": ["N"], "bins": ["4"]}, zero=("bins",), sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (0.0, 100.0)},
        # x - trunc(x) is exact and so is the product by 4: the quarter is its floor
        reference="np.bincount(np.floor(np.modf(x)[0] * 4).astype(np.int64), minlength=4)"
                  ".astype(np.uint64)",
        flops="3*N", bytes="8*N"),
    "22_histogram_count_quadrants": Recipe(
        shapes={"points": ["N"], "bins": ["4"]}, zero=("bins",), sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"points": (-1.0, 1.0)}, perturb={"points": "none"},
        reference="np.bincount(np.where(points['y'] >= 0, np.where(points['x'] >= 0, 0, 1), "
                  "np.where(points['x'] < 0, 2, 3)), minlength=4).astype(np.uint64)",
        flops="2*N", bytes="16*N"),
    "25_reduce_xor": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        reference="np.logical_xor.reduce(x)", flops="N", bytes="N/8"),
    "26_reduce_product_of_inverses": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=_cap(4096),
        train=[{"N": 4096}, {"N": 4093}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (0.0, 100.0)},
        reference="np.prod(np.where(np.arange(x.size) % 2 == 1, 1.0 / x, x))", rtol=1e-8,
        flops="2*N", bytes="8*N",
        note="at most 4096 elements: the product of more such ratios leaves the range of a "
             "double"),
    "27_reduce_average": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (0.0, 100.0)}, reference="x.mean()", flops="N", bytes="8*N"),
    "28_reduce_smallest_odd_number": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (0, 100)},
        reference="np.int32(np.where(x % 2 == 1, x, np.iinfo(np.int32).max).min())",
        flops="N", bytes="4*N"),
    "29_reduce_sum_of_min_of_pairs": Recipe(
        shapes={"x": ["N"], "y": ["N"], "result": []}, sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (0.0, 100.0), "y": (0.0, 100.0)}, reference="np.minimum(x, y).sum()",
        flops="2*N", bytes="16*N"),
    "30_scan_prefix_sum": Recipe(
        shapes={"x": ["N"], "output": ["N"]}, sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-100.0, 100.0)}, reference="np.cumsum(x)", scale="array",
        flops="N", bytes="16*N"),
    "31_scan_scan_with_min_function": Recipe(
        shapes={"x": ["N"]}, inout=("x",), sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-100.0, 100.0)}, reference="np.minimum.accumulate(x)",
        flops="N", bytes="8*N"),
    "32_scan_sum_of_prefix_sum_array": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-100.0, 100.0)}, reference="np.cumsum(x).sum()", rtol=1e-8,
        flops="2*N", bytes="8*N"),
    "33_scan_reverse_prefix_sum": Recipe(
        shapes={"x": ["N"], "output": ["N"]}, sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-100, 100)}, reference="np.cumsum(x[::-1]).astype(np.int32)",
        flops="N", bytes="8*N"),
    "34_scan_largest_contiguous_subarray_sum": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=_cap(1 << 14),
        train=[{"N": 1 << 14}, {"N": 16381}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-100, 100)},
        reference="def reference(x, **_):\n"
                  "    prefix = np.concatenate(([0], np.cumsum(x, dtype=np.int64)))\n"
                  "    # the best sum ending at j: prefix[j+1] minus the least prefix before it\n"
                  "    return np.int32((prefix[1:] - np.minimum.accumulate(prefix[:-1])).max())\n",
        flops="N*N", bytes="4*N"),
    "36_search_check_if_array_contains_value": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=lambda p: {"N": min(p, 1 << 21), "target": 77},
        train=[{"N": 1 << 21, "target": 77}, {"N": 999983, "target": 7}],
        heldout=[{"N": 1, "target": 3}, {"N": 17, "target": 49}],
        ranges={"x": (-50, 50)}, reference="np.bool_((x == target).any())",
        flops="N", bytes="4*N"),
    "37_search_find_the_closest_number_to_pi": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=_cap(1 << 21),
        train=[{"N": 1 << 21}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-10000.0, 10000.0)}, reference="np.uint64(np.argmin(np.abs(x - np.pi)))",
        flops="2*N", bytes="8*N"),
    "38_search_find_the_first_even_number": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=_cap(1 << 21),
        train=[{"N": 1 << 21}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (1, 40)},
        inputs="import numpy as np\n\n\ndef make_inputs(rng, N, **_):\n"
               "    \"\"\"ParEval's: odd numbers, two of them in the middle half made even.\"\"\"\n"
               "    x = (2 * rng.integers(1, 20, size=N) + 1).astype(np.int32)\n"
               "    x[rng.integers(N // 4, max(N // 4 + 1, 3 * N // 4), size=2)] += 1\n"
               "    return {\"x\": x}\n",
        reference="np.uint64(np.argmax(x % 2 == 0) if (x % 2 == 0).any() else x.size)",
        flops="N", bytes="4*N"),
    "39_search_xor_contains": Recipe(
        shapes={"x": ["N"], "y": ["N"], "result": []},
        sizes=lambda p: {"N": min(p, 1 << 21), "val": 500},
        train=[{"N": 1 << 21, "val": 500}, {"N": 999983, "val": 20000}],
        heldout=[{"N": 1, "val": 3}, {"N": 17, "val": 9}],
        ranges={"x": (-10000, 10000), "y": (-10000, 10000)},
        reference="np.bool_((x == val).any() != (y == val).any())", flops="2*N", bytes="8*N"),
    "40_sort_sort_an_array_of_complex_numbers_by_magnitude": Recipe(
        shapes={"x": ["N"]}, inout=("x",), sizes=_cap(1 << 17),
        train=[{"N": 1 << 17}, {"N": 99991}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-100.0, 100.0)}, reference="x[np.argsort(np.abs(x), kind='stable')]",
        flops="N*17", bytes="32*N"),
    "41_sort_k-th_smallest_element": Recipe(
        shapes={"x": ["N"], "result": []}, sizes=lambda p: {"N": min(p, 1 << 17), "k": 1000},
        train=[{"N": 1 << 17, "k": 1000}, {"N": 99991, "k": 99991}],
        heldout=[{"N": 1, "k": 1}, {"N": 17, "k": 9}],
        ranges={"x": (0, 10000)}, reference="np.int32(np.sort(x)[k - 1])",
        flops="N*17", bytes="4*N"),
    "42_sort_sorted_ranks": Recipe(
        shapes={"x": ["N"], "ranks": ["N"]}, sizes=_cap(1 << 17),
        train=[{"N": 1 << 17}, {"N": 99991}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-100.0, 100.0)}, perturb={"x": "none"},
        inputs="import numpy as np\n\n\ndef make_inputs(rng, N, **_):\n"
               "    \"\"\"Distinct floats in [-100, 100): a tie would make ranks ambiguous.\"\"\"\n"
               "    x = rng.permutation(N) * (200.0 / max(N, 1)) - 100.0\n"
               "    return {\"x\": x.astype(np.float32)}\n",
        reference="np.argsort(np.argsort(x, kind='stable'), kind='stable').astype(np.uint64)",
        flops="N*17", bytes="12*N", note="the values are distinct, so every rank is defined"),
    "43_sort_sort_an_array_of_structs_by_key": Recipe(
        shapes={"results": ["N"]}, inout=("results",), sizes=_cap(1 << 17),
        train=[{"N": 1 << 17}, {"N": 99991}], heldout=[{"N": 1}, {"N": 17}],
        perturb={"results": "none"},
        inputs="import numpy as np\n\n\ndef make_inputs(rng, N, **_):\n"
               "    \"\"\"Distinct start times: with ties the order std::sort leaves is not "
               "defined.\"\"\"\n"
               "    dtype = np.dtype([('startTime', np.int32), ('duration', np.int32), "
               "('value', np.float32)], align=True)\n"
               "    r = np.zeros(N, dtype)\n"
               "    r['startTime'] = rng.permutation(N)\n"
               "    r['duration'] = rng.integers(1, 10, size=N)\n"
               "    r['value'] = rng.uniform(-1.0, 1.0, size=N)\n"
               "    return {'results': r}\n",
        reference="results[np.argsort(results['startTime'], kind='stable')]",
        flops="N*17", bytes="24*N",
        note="start times are distinct (ParEval: in [0, 100), so ties leave the order open)"),
    "44_sort_sort_non-zero_elements": Recipe(
        shapes={"x": ["N"]}, inout=("x",), sizes=_cap(1 << 17),
        train=[{"N": 1 << 17}, {"N": 99991}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (0, 2**31 - 1)},
        inputs="import numpy as np\n\n\ndef make_inputs(rng, N, **_):\n"
               "    \"\"\"ParEval's: random non-negative ints, four in five of them zero.\"\"\"\n"
               "    x = rng.integers(0, 2**31 - 1, size=N)\n"
               "    x[rng.integers(0, 5, size=N) != 0] = 0\n"
               "    return {\"x\": x.astype(np.int32)}\n",
        reference="def reference(x, **_):\n    x = x.copy()\n    nonzero = x != 0\n"
                  "    x[nonzero] = np.sort(x[nonzero])\n    return x\n",
        flops="N*17", bytes="8*N"),
    "45_sparse_la_sparse_solve": Recipe(
        shapes={"A": ["NNZ"], "b": ["N"], "x": ["N"]},
        sizes=lambda p: {"N": min(p, 256), "NNZ": min(p, 256) ** 2 // 10 + min(p, 256)},
        train=[{"N": 256, "NNZ": 6809}, {"N": 127, "NNZ": 1739}],
        heldout=[{"N": 1, "NNZ": 1}, {"N": 17, "NNZ": 45}],
        ranges={"b": (-10.0, 10.0)}, perturb={"A": "none"},
        inputs=_COO_INPUTS + "\n\ndef make_inputs(rng, N, NNZ, **_):\n"
               "    return {'A': coo(rng, N, N, NNZ, dominant=True),\n"
               "            'b': rng.uniform(-10.0, 10.0, size=N)}\n",
        reference=_COO_DENSE + "\n\ndef reference(A, b, N, **_):\n"
                               "    return np.linalg.solve(dense(A, N, N), b)\n",
        flops="2*N*N*N/3", bytes="24*NNZ + 16*N",
        note="the entries sit at distinct positions, sorted by row and column, and the "
             "diagonal dominates (ParEval: random positions)"),
    "46_sparse_la_spmm": Recipe(
        shapes={"A": ["NA"], "X": ["NX"], "Y": ["M", "N"]},
        sizes=lambda p: {"M": min(p, 256), "K": min(p, 256) // 4, "N": min(p, 256) // 2,
                         "NA": min(p, 256) ** 2 // 40, "NX": min(p, 256) ** 2 // 80},
        train=[{"M": 256, "K": 64, "N": 128, "NA": 1638, "NX": 819},
               {"M": 127, "K": 31, "N": 61, "NA": 393, "NX": 189}],
        heldout=[{"M": 1, "K": 1, "N": 1, "NA": 1, "NX": 1},
                 {"M": 17, "K": 5, "N": 9, "NA": 8, "NX": 4}],
        perturb={"A": "none", "X": "none"},
        inputs=_COO_INPUTS + "\n\ndef make_inputs(rng, M, K, N, NA, NX, **_):\n"
               "    return {'A': coo(rng, M, K, NA), 'X': coo(rng, K, N, NX)}\n",
        reference=_COO_DENSE + "\n\ndef reference(A, X, M, K, N, **_):\n"
                               "    return dense(A, M, K, add=True) @ dense(X, K, N, add=True)\n",
        flops="2*NA*NX/K", bytes="24*(NA + NX) + 8*M*N",
        note="the entries sit at distinct positions, sorted by row and column"),
    "47_sparse_la_spmv": Recipe(
        shapes={"A": ["NNZ"], "x": ["N"], "y": ["M"]}, inout=("y",),
        scalars={"alpha": 0.5, "beta": -0.75},
        sizes=lambda p: {"M": min(p, 2048), "N": min(p, 2048), "NNZ": min(p, 2048) ** 2 // 10},
        train=[{"M": 2048, "N": 2048, "NNZ": 419430}, {"M": 1021, "N": 2039, "NNZ": 99991}],
        heldout=[{"M": 1, "N": 1, "NNZ": 1}, {"M": 17, "N": 5, "NNZ": 13}],
        perturb={"A": "none"},
        inputs=_COO_INPUTS + "\n\ndef make_inputs(rng, M, N, NNZ, **_):\n"
               "    return {'A': coo(rng, M, N, NNZ), 'x': rng.uniform(-1.0, 1.0, size=N),\n"
               "            'y': rng.uniform(-1.0, 1.0, size=M)}\n",
        reference=_COO_DENSE + "\n\ndef reference(A, x, y, M, N, alpha, beta, **_):\n"
                               "    return beta * y + alpha * (dense(A, M, N, add=True) @ x)\n",
        flops="2*NNZ + M", bytes="24*NNZ + 8*(N + 2*M)",
        note="the entries sit at distinct positions, sorted by row and column"),
    "48_sparse_la_sparse_axpy": Recipe(
        shapes={"x": ["NNZ"], "y": ["NNZ"], "z": ["N"]}, zero=("z",), scalars={"alpha": 0.5},
        sizes=lambda p: {"N": min(p, 1 << 20), "NNZ": min(p, 1 << 20) // 10},
        train=[{"N": 1 << 20, "NNZ": 104857}, {"N": 999983, "NNZ": 99991}],
        heldout=[{"N": 1, "NNZ": 1}, {"N": 17, "NNZ": 5}],
        perturb={"x": "none", "y": "none"},
        inputs="import numpy as np\n\n\ndef make_inputs(rng, N, NNZ, **_):\n"
               "    \"\"\"ParEval's: random indices (repeats allowed), sorted.\"\"\"\n"
               "    dtype = np.dtype([('index', np.uint64), ('value', np.float64)], align=True)\n"
               "    out = {}\n"
               "    for name in ('x', 'y'):\n"
               "        v = np.zeros(NNZ, dtype)\n"
               "        v['index'] = np.sort(rng.integers(0, N, size=NNZ))\n"
               "        v['value'] = rng.uniform(-1.0, 1.0, size=NNZ)\n"
               "        out[name] = v\n"
               "    return out\n",
        reference="def reference(x, y, N, alpha, **_):\n    z = np.zeros(N)\n"
                  "    np.add.at(z, x['index'].astype(np.int64), alpha * x['value'])\n"
                  "    np.add.at(z, y['index'].astype(np.int64), y['value'])\n    return z\n",
        flops="3*NNZ", bytes="32*NNZ + 8*N"),
    "49_sparse_la_sparse_lu_decomp": Recipe(
        shapes={"A": ["NNZ"], "L": ["N", "N"], "U": ["N", "N"]}, zero=("L", "U"),
        sizes=lambda p: {"N": min(p, 256), "NNZ": min(p, 256) ** 2 // 10 + min(p, 256)},
        train=[{"N": 256, "NNZ": 6809}, {"N": 127, "NNZ": 1739}],
        heldout=[{"N": 1, "NNZ": 1}, {"N": 17, "NNZ": 45}],
        perturb={"A": "none"},
        inputs=_COO_INPUTS + "\n\ndef make_inputs(rng, N, NNZ, **_):\n"
               "    return {'A': coo(rng, N, N, NNZ, dominant=True)}\n",
        reference=_COO_DENSE + "\n\ndef reference(A, N, **_):\n    LU = dense(A, N, N)\n"
                               "    for k in range(N - 1):  # Doolittle, no pivoting\n"
                               "        LU[k + 1:, k] /= LU[k, k]\n"
                               "        LU[k + 1:, k + 1:] -= np.outer(LU[k + 1:, k], "
                               "LU[k, k + 1:])\n"
                               "    return np.tril(LU, -1) + np.eye(N), np.triu(LU)\n",
        flops="2*N*N*N/3", bytes="24*NNZ + 16*N*N",
        note="the entries sit at distinct positions, sorted by row and column, and the "
             "diagonal dominates (ParEval: random positions)"),
    "50_stencil_xor_kernel": Recipe(
        shapes={"input": ["N", "N"], "output": ["N", "N"]}, sizes=_cap(2048),
        train=[{"N": 2048}, {"N": 2047}], heldout=_SQUARE, ranges={"input": (0, 2)},
        reference=_STENCIL_2D + "\n\ndef reference(N, **a):\n"
                                "    count = neighbours(a['input'] == 1, CROSS)\n"
                                "    return (count == 1).astype(np.int32)\n",
        flops="4*N*N", bytes="8*N*N"),
    "51_stencil_edge_kernel": Recipe(
        shapes={"imageIn": ["N", "N"], "imageOut": ["N", "N"]}, sizes=_cap(2048),
        train=[{"N": 2048}, {"N": 2047}], heldout=_SQUARE, ranges={"imageIn": (0, 255)},
        reference=_STENCIL_2D + "\n\ndef reference(imageIn, **_):\n"
                                "    total = 8 * imageIn.astype(np.int64) - "
                                "neighbours(imageIn, RING)\n"
                                "    return np.clip(total, 0, 255).astype(np.int32)\n",
        flops="18*N*N", bytes="8*N*N"),
    "52_stencil_1d_jacobi_3-point_stencil": Recipe(
        shapes={"input": ["N"], "output": ["N"]}, sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"input": (-100.0, 100.0)},
        reference="def reference(N, **a):\n    p = np.pad(a['input'], 1)\n"
                  "    return (p[:-2] + p[1:-1] + p[2:]) / 3.0\n",
        flops="3*N", bytes="16*N"),
    "53_stencil_2d_jacobi_5-point_stencil": Recipe(
        shapes={"input": ["N", "N"], "output": ["N", "N"]}, sizes=_cap(2048),
        train=[{"N": 2048}, {"N": 2047}], heldout=_SQUARE, ranges={"input": (-100.0, 100.0)},
        reference=_STENCIL_2D + "\n\ndef reference(N, **a):\n"
                                "    return (a['input'] + neighbours(a['input'], CROSS)) / 5.0\n",
        flops="5*N*N", bytes="16*N*N"),
    "54_stencil_game_of_life": Recipe(
        shapes={"input": ["N", "N"], "output": ["N", "N"]}, sizes=_cap(2048),
        train=[{"N": 2048}, {"N": 2047}], heldout=_SQUARE, ranges={"input": (0, 2)},
        reference=_STENCIL_2D + "\n\ndef reference(N, **a):\n"
                                "    alive = a['input'] == 1\n"
                                "    count = neighbours(alive, RING)\n"
                                "    return ((count == 3) | (alive & (count == 2)))"
                                ".astype(np.int32)\n",
        flops="9*N*N", bytes="8*N*N"),
    "55_transform_relu": Recipe(
        shapes={"x": ["N"]}, inout=("x",), sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-50.0, 50.0)}, reference="np.maximum(x, 0.0)", flops="N", bytes="16*N"),
    "56_transform_negate_odds": Recipe(
        shapes={"x": ["N"]}, inout=("x",), sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (1, 100)}, reference="np.where(x % 2 == 0, x // 2, -x).astype(np.int32)",
        flops="N", bytes="8*N"),
    "57_transform_inverse_offset": Recipe(
        shapes={"x": ["N"]}, inout=("x",), sizes=_cap(1 << 21),
        train=[{"N": 1 << 21}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-50.0, 50.0)}, reference="1.0 - 1.0 / x", flops="2*N", bytes="16*N"),
    "58_transform_squaring": Recipe(
        shapes={"x": ["N"]}, inout=("x",), sizes=_cap(1 << 22),
        train=[{"N": 1 << 22}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (-50, 50)}, reference="x * x", flops="N", bytes="8*N"),
    "59_transform_map_function": Recipe(
        shapes={"x": ["N"], "mask": ["N"]}, sizes=_cap(1 << 21),
        train=[{"N": 1 << 21}, {"N": 999983}], heldout=[{"N": 1}, {"N": 17}],
        ranges={"x": (1, 1025)}, reference="(x > 0) & ((x & (x - 1)) == 0)",
        flops="3*N", bytes="5*N"),
}


@dataclass
class Problem:
    name: str
    prompts: dict[str, str]  # directory name ("serial", "omp") -> ParEval's prompt
    bench: Path | None  # drivers/cpp/benchmarks/<type>/<name>
    size: int | None  # ParEval's serial problem size


def read_checkout(checkout: Path) -> list[Problem]:
    """ParEval's C++ problems with their serial and OpenMP prompts, driver folder and size."""
    prompts_path = checkout / "prompts" / "generation-prompts.json"
    bench_root = checkout / "drivers" / "cpp" / "benchmarks"
    if not prompts_path.is_file() or not bench_root.is_dir():
        raise TaskError(f"{checkout} is not a ParEval checkout (no prompts/generation-prompts."
                        "json or drivers/cpp/benchmarks/): clone "
                        "https://github.com/parallelcodefoundry/ParEval and pass its directory")
    problems: dict[str, Problem] = {}
    benches = {p.name: p for p in bench_root.glob("*/*") if p.is_dir()}
    sizes_path = checkout / "drivers" / "problem-sizes.json"
    sizes = json.loads(sizes_path.read_text()) if sizes_path.is_file() else {}
    for entry in json.loads(prompts_path.read_text()):
        model = {v: k for k, v in MODELS.items()}.get(entry.get("parallelism_model"))
        if model is None or entry.get("language") != "cpp":
            continue
        name = entry["name"]
        p = problems.setdefault(name, Problem(name, {}, benches.get(name),
                                              _size(sizes.get(name, {}).get("serial"))))
        p.prompts[model] = entry["prompt"]
    return [problems[k] for k in sorted(problems)]


def _size(text: str | None) -> int | None:
    """ParEval writes sizes as C expressions: "(1<<20)"."""
    m = re.fullmatch(r"\(?\s*1\s*<<\s*(\d+)\s*\)?", text or "")
    return 1 << int(m.group(1)) if m else None


def split_prompt(prompt: str) -> tuple[str, str]:
    """(the prompt without its last line, the entry signature on that last line)."""
    lines = prompt.rstrip().splitlines()
    return "\n".join(lines[:-1]), lines[-1].strip().rstrip("{").strip()


def _unsupported(signature: str, preamble: str, exc: SignatureError) -> str:
    """A short reason a signature cannot be stated (the parser's message when none fits)."""
    if "std::string" in signature:
        return "signature: strings are not supported"
    for elem in re.findall(r"vector<\s*(\w+)\s*>", signature):
        if elem not in C_TYPES and "std::string" in preamble:
            return f"signature: struct {elem} holds a std::string (only numbers are supported)"
    return f"signature: {exc}"


def prompt_structs(preamble: str) -> dict[str, dict[str, str]]:
    """The structs a prompt defines whose fields are all numbers: name -> field -> C type."""
    structs = {}
    for name, body in re.findall(r"struct\s+(\w+)\s*\{(.*?)\};", preamble, re.S):
        fields = {}
        for decl in body.split(";"):
            m = re.match(r"\s*(.*?)\s*\b(\w+(?:\s*,\s*\w+)*)\s*$", decl)
            if m and m.group(1):
                fields.update({f.strip(): " ".join(m.group(1).split())
                               for f in m.group(2).split(",")})
        if fields and all(t in C_TYPES for t in fields.values()):
            structs[name] = fields
    return structs


def driver_atol(bench: Path) -> float | None:
    """The absolute tolerance in the driver's validate(), or None when it compares exactly."""
    driver = bench / "cpu.cc"
    text = driver.read_text() if driver.is_file() else ""
    body = text[text.find("bool validate("):]
    m = re.search(r"\b(\d(?:\.\d+)?e-\d+)\b", body)
    return float(m.group(1)) if m else None


# ---- ParEval's own serial solution as a candidate ----------------------------------------------

# what ParEval's driver includes before baseline.hpp (the baselines rely on it)
_DRIVER_HEADERS = ("algorithm", "cmath", "complex", "limits", "numeric", "vector")
_CORRECT = re.compile(r"^[^\n;{}]*?\b(correct\w+)\s*\(", re.M)


def serial_solution(bench: Path, entry: str, preamble: str) -> str:
    """ParEval's `correct...` function from baseline.hpp, renamed to the entry, after the prompt's
    own definitions; every other function goes into an anonymous namespace (perfgym's object
    audit allows one global function: the entry)."""
    text = _drop_gpu_blocks((bench / "baseline.hpp").read_text())
    text = re.sub(r"\bNO_INLINE\b", "", text).replace("#pragma once", "")
    preamble = "\n".join(line for line in preamble.splitlines() if "<omp.h>" not in line)
    m = _CORRECT.search(text)
    if m is None:
        raise ValueError(f"{bench / 'baseline.hpp'}: no correct...() function")
    start = m.start()
    end = _matching_brace(text, text.index("{", m.end()))
    function = text[start:end + 1].replace(m.group(1), entry, 1)
    rest = text[:start] + text[end + 1:]
    # the entry's own struct types must not have internal linkage: they stay at file scope
    structs = re.findall(r"^struct\s+\w+\s*\{.*?\};", preamble, re.S | re.M)
    for struct in structs:
        preamble = preamble.replace(struct, "")
    includes = [line for line in (preamble + "\n" + rest).splitlines()
                if line.strip().startswith("#include")]
    body = "\n".join(line for line in (preamble + "\n" + rest).splitlines()
                     if not line.strip().startswith("#include"))
    includes = sorted(set(includes) | {f"#include <{h}>" for h in _DRIVER_HEADERS})
    return "\n\n".join(["\n".join(includes), *structs, f"namespace {{\n{body}\n}}  // namespace",
                        function]) + "\n"


def _matching_brace(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError("unbalanced braces in baseline.hpp")


def _drop_gpu_blocks(text: str) -> str:
    """Remove the `#if defined(USE_CUDA) ...` branches (keeping their #else) of a header."""
    out, stack = [], []  # stack: for each open #if, whether it is a GPU condition
    keep = True
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#if"):
            gpu = "USE_CUDA" in s or "USE_HIP" in s
            stack.append((gpu, keep))
            if gpu:
                keep = False
                continue
        elif s.startswith("#else") and stack and stack[-1][0]:
            keep = stack[-1][1]
            continue
        elif s.startswith("#endif") and stack:
            gpu, outer = stack.pop()
            if gpu:
                keep = outer
                continue
        if keep:
            out.append(line)
    return "\n".join(out)


# ---- writing tasks ----------------------------------------------------------------------------


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return "[" + ", ".join(_toml(v) for v in value) + "]"


def _task_name(problem: str, model: str) -> str:
    return "pareval_" + re.sub(r"\W", "_", problem) + "_" + model


def translate(problem: Problem, recipe: Recipe) -> dict:
    """The task.toml fields of a problem (without the per-model ones), or raise ValueError with the
    reason it cannot be stated."""
    preamble, signature_text = split_prompt(problem.prompts["serial"])
    structs = prompt_structs(preamble)
    signature = parse_signature(signature_text, frozenset(structs))
    arrays = {}
    for p in signature.params:
        if not p.vector:
            continue
        if p.name not in recipe.shapes:
            raise ValueError(f"parameter {p.name!r} is not in our translation (ParEval changed "
                             "the signature?)")
        if p.ctype not in C_TYPES and p.ctype not in structs:
            raise ValueError(f"the prompt does not define struct {p.ctype} with number fields")
        role = "in" if p.const else "inout" if p.name in recipe.inout else "out"
        arrays[p.name] = {"shape": recipe.shapes[p.name], "role": role,
                          "dtype": C_TYPES.get(p.ctype, p.ctype)}
    if signature.ret != "void":
        arrays["result"] = {"shape": [], "dtype": C_TYPES[signature.ret], "role": "out"}
    if set(arrays) != set(recipe.shapes):
        raise ValueError("our translation's arrays do not match ParEval's signature")
    for name, a in arrays.items():
        if name in recipe.ranges and a["role"] != "out":
            a["low"], a["high"] = recipe.ranges[name]
        if name in recipe.zero:
            a["init"] = "zero"
        if name in recipe.perturb:
            a["perturb"] = recipe.perturb[name]
    default = recipe.sizes(problem.size or 1 << 20)
    exact = all(a["dtype"].startswith(("int", "uint", "bool"))
                for a in arrays.values() if a["role"] != "in")
    atol = driver_atol(problem.bench) if problem.bench else None
    return {"entry": signature_text, "arrays": arrays, "default": default,
            "structs": {p.ctype: structs[p.ctype] for p in signature.params
                        if p.ctype in structs},
            "atol": 0.0 if exact else (atol if atol is not None else 1e-6),
            "rtol": 0.0 if exact else recipe.rtol, "signature": signature}


def write_task(directory: Path, problem: Problem, model: str, recipe: Recipe, fields: dict,
               require_parallel: bool) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    preamble, _ = split_prompt(problem.prompts[model])
    text = "\n".join(line for line in preamble.splitlines() if "#include" not in line).strip()
    description = f"ParEval problem {problem.name} ({model} prompt):\n\n{text}"
    code = re.sub(r"//.*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))
    if code.strip():  # helpers or constants the prompt defines before the function
        description += ("\n\nYour code must itself contain the definitions above (ParEval's "
                        "prompt gives them before the function), with its helper functions "
                        "made static.")
    if recipe.note:
        description += f"\n\n(perfgym's inputs: {recipe.note}.)"
    lines = [f"name = {_toml(_task_name(problem.name, model))}", 'language = "cpp"',
             f"kind = {_toml(problem.bench.parent.name if problem.bench else 'pareval')}",
             f"description = {_toml(description)}", f"entry = {_toml(fields['entry'])}",
             f"flops = {_toml(recipe.flops)}", f"bytes = {_toml(recipe.bytes)}",
             'baseline = "baseline.cpp"']
    if fields["signature"].ret != "void":
        lines.append('returns = "result"')
    if recipe.reference.startswith(("def ", "import ", "from ")):
        (directory / "reference.py").write_text("import numpy as np\n" + recipe.reference)
        lines.append('reference = "reference.py"')
    else:
        lines.append(f"reference = {_toml(recipe.reference)}")
    if recipe.inputs:
        (directory / "inputs.py").write_text(recipe.inputs)
        lines.append('inputs = "inputs.py"')
    if require_parallel and model == "omp":
        lines.append('require = ["openmp"]  # ParEval\'s rule: an OpenMP solution must use OpenMP')
    if recipe.scalars:
        lines += ["", "[scalars]", *(f"{k} = {_toml(v)}" for k, v in recipe.scalars.items())]
    for name, struct_fields in fields["structs"].items():
        lines += ["", f"[structs.{name}]", *(f"{k} = {_toml(v)}" for k, v in
                                            struct_fields.items())]
    for name, a in fields["arrays"].items():
        lines += ["", f"[arrays.{name}]", *(f"{k} = {_toml(v)}" for k, v in a.items())]
    lines += ["", "[sizes]", f"default = {_toml(fields['default'])}",
              f"train = {_toml(recipe.train)}", f"heldout = {_toml(recipe.heldout)}",
              "", "[verify]", 'mode = "full"',
              "# ParEval's driver's absolute tolerance, and a relative one for large sizes",
              f"atol = {_toml(fields['atol'])}", f"rtol = {_toml(fields['rtol'])}",
              f"scale = {_toml(recipe.scale)}"]
    (directory / "task.toml").write_text("\n".join(lines) + "\n")
    (directory / "prompt.txt").write_text(problem.prompts[model])  # ParEval's, verbatim


def import_pareval(checkout: Path, out: Path, require_parallel: bool = False) -> dict:
    """Write the task directories; returns (and writes to out/import.json) what was imported
    and what was skipped with the reason."""
    imported, skipped = [], []
    for problem in read_checkout(checkout):
        reason = None
        if set(problem.prompts) != set(MODELS):
            reason = "no serial and OpenMP prompts"
        elif problem.bench is None or not (problem.bench / "baseline.hpp").is_file():
            reason = "no drivers/cpp/benchmarks/*/<problem>/baseline.hpp"
        else:
            preamble, signature_text = split_prompt(problem.prompts["serial"])
            try:
                parse_signature(signature_text, frozenset(prompt_structs(preamble)))
            except SignatureError as exc:
                reason = _unsupported(signature_text, preamble, exc)
        recipe = RECIPES.get(problem.name)
        if reason is None and recipe is None:
            reason = UNTRANSLATED.get(problem.name, "no NumPy translation of this problem in "
                                      "perfgym.tasks.pareval.RECIPES")
        if reason is None:
            try:
                fields = translate(problem, recipe)
                baseline = serial_solution(problem.bench, fields["signature"].name, preamble)
            except (ValueError, OSError) as exc:
                reason = str(exc)
        if reason is not None:
            skipped.append({"problem": problem.name, "reason": reason})
            continue
        for model in MODELS:
            directory = out / model / problem.name
            write_task(directory, problem, model, recipe, fields, require_parallel)
            (directory / "baseline.cpp").write_text(baseline)
        imported.append(problem.name)
    summary = {"checkout": str(checkout), "imported": imported, "skipped": skipped,
               "models": list(MODELS), "require_parallel": require_parallel}
    out.mkdir(parents=True, exist_ok=True)
    (out / "import.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
