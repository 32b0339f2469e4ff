"""tenfold.tucker: (core, factors) in NumPy axis order, methods, error bounds, orders and
dtypes, and the documented errors."""

import numpy as np
import pytest

import tenfold


def full(core, factors):
    x = core
    for n, u in enumerate(factors):
        x = np.moveaxis(np.tensordot(u, x, axes=(1, n)), 0, n)
    return x


def low_rank(shape, ranks, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    core = rng.standard_normal(ranks)
    factors = [np.linalg.qr(rng.standard_normal((n, r)))[0] for n, r in zip(shape, ranks)]
    return full(core, factors).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method", ["sthosvd", "hosvd", "hooi"])
def test_exact_multilinear_rank_is_recovered(dtype, method):
    x = low_rank((30, 20, 10), (5, 4, 3), seed=2, dtype=dtype)
    r = tenfold.tucker(x, rank=[5, 4, 3], method=method)
    core, factors = r
    assert core.shape == (5, 4, 3) and [f.shape for f in factors] == [(30, 5), (20, 4), (10, 3)]
    assert core.dtype == dtype and all(f.dtype == dtype for f in factors)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(full(core, factors), x, atol=tol * np.abs(x).max())
    for u in factors:
        np.testing.assert_allclose(u.T @ u, np.eye(u.shape[1]), atol=tol)
    # relative_error = sqrt(||X||^2 - ||G||^2) / ||X|| cancels below about sqrt(eps).
    assert r.relative_error < 3 * np.sqrt(np.finfo(dtype).eps) and r.compression_ratio > 1
    assert [len(e) for e in r.eigenvalues] == [30, 20, 10]
    if method == "hooi":
        assert len(r.error_history) == r.iterations + 1
    else:
        assert r.iterations == 0 and r.converged


def test_error_bound_and_int_rank():
    x = np.random.default_rng(0).random((20, 15, 10))
    r = tenfold.tucker(x, tol=0.3)
    err = np.linalg.norm(full(*r) - x) / np.linalg.norm(x)
    assert err <= 0.3 and err == pytest.approx(r.relative_error, abs=1e-10)
    assert tenfold.tucker(x, 4).core.shape == (4, 4, 4)


def test_tiny_tol_picks_the_smallest_exact_ranks_and_reports_the_true_error():
    # Rank (2, 2, 2) exactly; the Gram eigenvalues' round-off used to count as rank
    # (3, 3, 4) and the reported error bottomed out near 1e-8.
    x = np.arange(60.0).reshape(3, 4, 5)
    r = tenfold.tucker(x, tol=1e-10)
    assert r.rank == (2, 2, 2)
    err = np.linalg.norm(full(*r) - x) / np.linalg.norm(x)
    assert r.relative_error <= 1e-10
    assert r.relative_error == pytest.approx(err, abs=1e-13)


@pytest.mark.parametrize("dtype, scales", [(np.float64, [1e-150, 1e150]),
                                           (np.float32, [1e-37, 1e-21, 1e30])])
def test_extreme_magnitudes_give_the_result_at_one_scaled(dtype, scales):
    # Used to give an all-zero core and relative_error 0 (the truth is about 0.4).
    x = np.random.default_rng(5).standard_normal((6, 5, 4))
    want = tenfold.tucker(x.astype(dtype), rank=[2, 2, 2])
    for s in scales:
        got = tenfold.tucker((x * s).astype(dtype), rank=[2, 2, 2])
        assert got.relative_error == pytest.approx(want.relative_error, abs=1e-5)
        np.testing.assert_allclose(got.core / s, want.core, rtol=1e-3, atol=1e-3)


def test_unrepresentable_eigenvalues_are_refused():
    x = np.random.default_rng(5).standard_normal((6, 5, 4)) * 1e-300
    with pytest.raises(tenfold.NumericalError, match="Gram eigenvalues"):
        tenfold.tucker(x, rank=[2, 2, 2])


def test_c_and_fortran_order_give_the_same_bits():
    x = np.random.default_rng(1).random((12, 9, 7, 5))
    for method in ("sthosvd", "hooi"):
        c = tenfold.tucker(x, rank=[4, 3, 3, 2], method=method)
        f = tenfold.tucker(np.asfortranarray(x), rank=[4, 3, 3, 2], method=method)
        np.testing.assert_array_equal(c.core, f.core)
        for a, b in zip(c.factors, f.factors):
            np.testing.assert_array_equal(a, b)
        assert c.mode_order == f.mode_order


def test_mode_order_is_in_numpy_axes():
    x = np.random.default_rng(2).random((12, 9, 7))
    r = tenfold.tucker(x, rank=[2, 3, 4], mode_order=[2, 0, 1])
    assert r.mode_order == [2, 0, 1]
    with pytest.raises(ValueError):
        tenfold.tucker(x, rank=[2, 3, 4], mode_order=[0, 0, 1])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(), "exactly one"),
        (dict(rank=2, tol=0.1), "exactly one"),
        (dict(rank=[2, 2]), "rank"),
        (dict(rank=[2, 2, 40]), "rank"),
        (dict(tol=1.5), "(0, 1)"),
        (dict(rank=2, method="svd"), "svd"),
    ],
)
def test_documented_errors(kwargs, message):
    x = np.random.default_rng(3).random((6, 5, 4))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tenfold.tucker(x, **kwargs)


def test_memory_error_before_allocating():
    # The axis-0 Gram of a 160000 x 2 x 1 tensor (2.5 MB) would take 200 GB.
    tall = np.random.default_rng(4).random((160000, 2, 1))
    with pytest.raises(MemoryError, match="needs about"):
        tenfold.tucker(tall, rank=[2, 2, 1])
    with pytest.raises(MemoryError, match="needs about"):
        tenfold.parafac(tall, 1, init="nvecs")
