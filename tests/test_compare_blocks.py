"""compare() works block by block (verify.BLOCK_ELEMENTS): it must give the verdict, the
largest error and the same worst element as one whole-array pass, whatever the blocks."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from perfgym import verify
from perfgym.verify import compare


def whole_array(got, expected, rtol, atol, points=None, scale="element"):
    """The verdict's figures from one pass over the whole arrays (the way compare worked
    before blocks): (ok, max_error, flat index of the worst element or None, wrong count)."""
    if got.dtype.kind == "b":
        got, expected = got.view(np.uint8), np.asarray(expected).astype(bool).astype(np.uint8)
    g = got.reshape(-1)
    e = np.asarray(expected).astype(got.dtype).reshape(-1)
    index = np.arange(g.size) if points is None else points
    g, e = g[index], e[index]
    if got.dtype.kind in "iu":
        bad = np.nonzero(g != e)[0]
        err = np.abs(g.astype(np.float64) - e.astype(np.float64))
        bound = np.zeros_like(err)
    else:
        wide = np.complex128 if got.dtype.kind == "c" else np.float64
        g64, e64 = g.astype(wide), e.astype(wide)
        with np.errstate(invalid="ignore"):
            err = np.abs(g64 - e64)
        if scale == "array":
            full = np.abs(np.asarray(expected).astype(wide))
            bound = np.full_like(err, atol + rtol * float(full[np.isfinite(full)].max(initial=0)))
        else:
            bound = atol + rtol * np.abs(e64)
        with np.errstate(invalid="ignore"):
            bad = np.nonzero(~(np.isfinite(g64) | ~np.isfinite(e64))
                             | (err > bound) & np.isfinite(e64))[0]
        err = np.where(np.isfinite(err), err, np.inf)
    max_error = float(err.max()) if err.size else 0.0
    if bad.size == 0:
        return True, max_error, None, 0
    over = np.where(np.isfinite(err[bad]), err[bad] - bound[bad], np.inf)
    return False, max_error, int(index[bad[np.argmax(over)]]), int(bad.size)


def agree(got, expected, rtol, atol, points=None, scale="element"):
    ok, max_error, worst, wrong = whole_array(got, expected, rtol, atol, points, scale)
    v = compare("X", got, expected, rtol, atol, points, scale)
    assert v.ok == ok
    assert v.max_error == pytest.approx(max_error, rel=0, abs=0) or (
        np.isinf(v.max_error) and np.isinf(max_error))
    if not ok:
        checked = got.size if points is None else len(points)
        assert f"{wrong} of {checked} checked elements wrong" in v.where
        if got.ndim:
            pos = ", ".join(str(int(i)) for i in np.unravel_index(worst, got.shape))
            assert v.where.startswith(f"X[{pos}] = ")
    return v


@pytest.fixture(params=[1, 7, 64, 1 << 14], ids=lambda b: f"block{b}")
def block(request, monkeypatch):
    monkeypatch.setattr(verify, "BLOCK_ELEMENTS", request.param)
    return request.param


def spoil(got, rng, count):
    flat = got.reshape(-1)
    for i in rng.choice(flat.size, size=count, replace=False):
        flat[i] = flat[i] + rng.uniform(0.5, 2) if got.dtype.kind != "b" else not flat[i]
    return got


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64", "complex128", "bool"])
@pytest.mark.parametrize("shape", [(), (1,), (37,), (9, 11), (3, 4, 5)])
@pytest.mark.parametrize("wrong", [0, 1, 5])
def test_blocks_agree_with_one_pass(dtype, shape, wrong, block):
    rng = np.random.default_rng(zlib.crc32(repr((dtype, shape, wrong)).encode()))
    expected = (rng.uniform(-3, 3, size=shape) * 10).astype(dtype)
    if dtype == "complex128":
        expected = expected + 1j * rng.uniform(-3, 3, size=shape)
    got = expected.copy()
    n = int(np.prod(shape))
    if wrong and n >= wrong:
        spoil(got, rng, wrong)
    agree(got, expected, 1e-6, 1e-9)
    agree(got, expected, 1e-3, 0.0, scale="array")


def test_a_transposed_reference_is_compared_element_for_element(block):
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, (23, 17))
    got = np.ascontiguousarray(a.T)
    assert agree(got, a.T, 0.0, 0.0).ok
    got[16, 22] = 9.0  # the last element, in the last block
    got[3, 0] = -1.0
    v = agree(got, a.T, 0.0, 0.0)
    assert v.where.startswith("X[16, 22] = 9") and "2 of 391" in v.where


def test_nan_and_inf(block):
    expected = np.linspace(1, 2, 50)
    for bad_value in (np.nan, np.inf, -np.inf):
        got = expected.copy()
        got[31] = bad_value
        v = agree(got, expected, 1e-6, 1e-9)
        assert not v.ok and v.where.startswith("X[31] = ")
    # an infinite answer where the reference is infinite too is right, and its error is inf
    expected[4] = got[4] = np.inf
    got[31] = expected[31]
    v = agree(got, expected, 1e-6, 1e-9)
    assert v.ok and np.isinf(v.max_error)
    # a NaN reference element is not checked (the task's reference said nothing there)
    expected[7] = np.nan
    assert agree(got, expected, 1e-6, 1e-9).ok


def test_ties_go_to_the_first_element_in_order(block):
    expected = np.zeros(40)
    got = expected.copy()
    got[[5, 17, 33]] = 2.0  # three elements equally far off, in different blocks
    v = agree(got, expected, 0.0, 0.5)
    assert v.where.startswith("X[5] = 2")
    got[33] = np.nan  # NaN counts as the most off
    assert agree(got, expected, 0.0, 0.5).where.startswith("X[33] = nan")


def test_sampled_points(block):
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 1, (30, 20))
    got = np.ascontiguousarray(a.T)
    points = verify.sample_points(got.shape, rng)
    assert agree(got, a.T, 1e-9, 0.0, points).ok
    got.reshape(-1)[points[len(points) // 2]] += 1
    got.reshape(-1)[np.setdiff1d(np.arange(got.size), points)[0]] += 5  # not sampled
    v = agree(got, a.T, 1e-9, 0.0, points)
    assert not v.ok and f"1 of {len(points)} checked" in v.where


def test_a_flat_reference_for_a_shaped_output(block):
    got = np.arange(12.0).reshape(3, 4)
    assert agree(got, np.arange(12.0), 0, 0).ok
    assert not compare("X", got, np.arange(11.0), 0, 0).ok  # a different element count
