"""tenfold.parafac2 and tenfold.coupled_matrix_tensor_3d_factorization: TensorLy's results
from the same start, missing entries, bad input, and TensorLy's own test files run with the
patch (the counts printed)."""


import numpy as np
import pytest

tl = pytest.importorskip("tensorly")
import tenfold  # noqa: E402
import tenfold.tensorly as tt  # noqa: E402
from test_tensorly_patch import native_share, run_tensorly_suites  # noqa: E402
from tensorly.cp_tensor import cp_to_tensor  # noqa: E402
from tensorly.decomposition import coupled_matrix_tensor_3d_factorization as tl_cmtf  # noqa: E402
from tensorly.decomposition import parafac2 as tl_parafac2  # noqa: E402
from tensorly.decomposition._parafac2 import initialize_decomposition  # noqa: E402
from tensorly.parafac2_tensor import parafac2_to_slices  # noqa: E402
from tensorly.random import random_cp, random_parafac2  # noqa: E402

FUNCTIONS = ("parafac2", "coupled_matrix_tensor_3d_factorization")


def planted_slices(seed=0, noise=0.01, k=12, j=10, rank=3):
    rng = np.random.RandomState(seed)
    truth = random_parafac2([(8 + rng.randint(6), j) for _ in range(k)], rank=rank,
                            random_state=rng)
    truth.factors[0] = truth.factors[0] + 0.1
    slices = parafac2_to_slices(truth)
    return truth, [s + noise * np.linalg.norm(s) / np.sqrt(s.size) * rng.standard_normal(s.shape)
                   for s in slices]


def congruence(a, b):
    """Mean |cosine| of matched columns (greedy on this small rank)."""
    a, b = a / np.linalg.norm(a, axis=0), b / np.linalg.norm(b, axis=0)
    c = np.abs(a.T @ b)
    return float(np.mean(np.max(c, axis=1)))


@pytest.mark.parametrize("linesearch", [False, True])
@pytest.mark.parametrize("normalize", [False, True])
def test_parafac2_same_errors_as_tensorly_from_the_same_start(linesearch, normalize):
    _, slices = planted_slices()
    w, f, p = initialize_decomposition(slices, 3, init="random", random_state=3)
    _, e_tl = tl_parafac2(slices, 3, init=(w, [x.copy() for x in f], p), n_iter_max=40,
                          tol=1e-12, linesearch=linesearch, normalize_factors=normalize,
                          return_errors=True)
    res = tenfold.parafac2(slices, 3, init=(w, f), n_iter_max=40, tol=1e-12,
                           linesearch=linesearch, normalize_factors=normalize)
    assert len(res.errors) == len(e_tl)
    # float64 arithmetic in another order: 10 digits along the whole history
    np.testing.assert_allclose(res.errors, e_tl, rtol=1e-10)


def test_parafac2_recovers_a_planted_model_with_30_percent_missing():
    truth, slices = planted_slices(seed=1, k=20, j=15)
    rng = np.random.RandomState(2)
    holes = [rng.random_sample(s.shape) < 0.3 for s in slices]
    before = [s.copy() for s in slices]
    x = [np.where(h, np.nan, s) for h, s in zip(holes, slices)]
    res = tenfold.parafac2(x, 3, mask="nan", n_iter_max=500)
    assert congruence(truth.factors[0], res.factors[0]) > 0.95
    assert congruence(truth.factors[2], res.factors[2]) > 0.95
    res2 = tenfold.parafac2(slices, 3, mask=[~h for h in holes], n_iter_max=500)
    np.testing.assert_allclose(res2.relative_error, res.relative_error, rtol=1e-8)
    for s, b in zip(slices, before):
        np.testing.assert_array_equal(s, b)


def test_parafac2_float32_and_result_shape():
    # Gaussian B and C (TensorLy's random_parafac2 draws non-negative ones, whose components
    # are so close that ALS crawls through a swamp)
    rng = np.random.RandomState(4)
    a, b, c = rng.uniform(0.5, 1.5, (15, 3)), rng.standard_normal((3, 3)), rng.standard_normal((10, 3))
    slices = [np.linalg.qr(rng.standard_normal((9 + k % 5, 3)))[0] @ b @ np.diag(a[k]) @ c.T
              for k in range(15)]
    res = tenfold.parafac2([s.astype(np.float32) for s in slices], 3, tol=1e-7, n_iter_max=500)
    assert res.factors[0].dtype == np.float32
    weights, factors, projections = res
    assert [p.shape for p in projections] == [(s.shape[0], 3) for s in slices]
    assert res.shape == tuple(s.shape for s in slices)
    assert res.relative_error < 1e-3
    rec = parafac2_to_slices(res)
    assert max(np.max(np.abs(r - s)) for r, s in zip(rec, slices)) < 1e-2 * np.max(np.abs(slices[0]))


def test_parafac2_bad_input():
    _, slices = planted_slices()
    with pytest.raises(ValueError, match="at least one slice"):
        tenfold.parafac2([], 2)
    with pytest.raises(ValueError, match="slice 1 has 9 columns, slice 0 has 10"):
        tenfold.parafac2([slices[0], slices[1][:, :9]], 2)
    with pytest.raises(ValueError, match="rank must be at least 1"):
        tenfold.parafac2(slices, 0)
    with pytest.raises(ValueError, match="J = 10, got 11"):
        tenfold.parafac2(slices, 11)
    bad = [s.copy() for s in slices]
    bad[2][3, 4] = np.nan
    with pytest.raises(ValueError, match=r"slice 2 has a non-finite entry at \(3, 4\)"):
        tenfold.parafac2(bad, 2)
    with pytest.raises(ValueError, match="mask 1 has shape"):
        tenfold.parafac2(slices, 2, mask=[np.ones(s.shape) for s in slices[:1]] +
                         [np.ones((2, 2))] * (len(slices) - 1))
    with pytest.raises(ValueError, match="masks for"):
        tenfold.parafac2(slices, 2, mask=[np.ones(slices[0].shape)])


def coupled(seed=1234, noise=0.0):
    rng = tl.check_random_state(seed)
    x_cp = random_cp((21, 12, 16), rank=3, normalise_factors=False, random_state=rng)
    y_cp = random_cp((21, 14), rank=3, normalise_factors=False, random_state=rng)
    y_cp.factors[0] = x_cp.factors[0]
    x, y = cp_to_tensor(x_cp), cp_to_tensor(y_cp)
    return x + noise * rng.standard_normal(x.shape), y + noise * rng.standard_normal(y.shape)


@pytest.mark.filterwarnings("ignore:Reached maximum iteration")
def test_cmtf_same_errors_as_tensorly_from_the_same_start():
    x, y = coupled(noise=0.01)
    start = [np.random.RandomState(5).random_sample((n, 3)) for n in x.shape]
    _, _, e_tl = tl_cmtf(x, y, 3, init=(None, [s.copy() for s in start]), n_iter_max=50)
    a, b, e_tf = tenfold.coupled_matrix_tensor_3d_factorization(x, y, 3, init=(None, start),
                                                                n_iter_max=50)
    assert len(e_tf) == len(e_tl)
    np.testing.assert_allclose(e_tf, e_tl, rtol=1e-10)
    assert np.allclose(a.factors[0], b.factors[0])


def test_cmtf_with_missing_entries_recovers_the_model():
    x, y = coupled(noise=0.0)
    rng = np.random.RandomState(0)
    mx, my = rng.random_sample(x.shape) >= 0.3, rng.random_sample(y.shape) >= 0.3
    a, b, _ = tenfold.coupled_matrix_tensor_3d_factorization(
        np.where(mx, x, np.nan), np.where(my, y, np.nan), 3, mask="nan", n_iter_max=500,
        tol=1e-12)
    assert np.linalg.norm(cp_to_tensor(a) - x) / np.linalg.norm(x) < 1e-3
    assert np.linalg.norm(cp_to_tensor(b) - y) / np.linalg.norm(y) < 1e-3
    a2, _, _ = tenfold.coupled_matrix_tensor_3d_factorization(
        x, y, 3, mask=mx, matrix_mask=my, n_iter_max=500, tol=1e-12)
    np.testing.assert_allclose(cp_to_tensor(a2), cp_to_tensor(a), atol=1e-8 * np.abs(x).max())


def test_cmtf_bad_input():
    x, y = coupled()
    with pytest.raises(ValueError, match="the matrix has 20 rows, the tensor's first axis 21"):
        tenfold.coupled_matrix_tensor_3d_factorization(x, y[:20], 3)
    with pytest.raises(ValueError, match="3-D"):
        tenfold.coupled_matrix_tensor_3d_factorization(x[0], y, 3)
    with pytest.raises(ValueError, match="mask has shape"):
        tenfold.coupled_matrix_tensor_3d_factorization(x, y, 3, mask=np.ones((2, 2, 2)))
    bad = x.copy()
    bad[1, 2, 3] = np.inf
    with pytest.raises(ValueError, match=r"non-finite entry at \(1, 2, 3\)"):
        tenfold.coupled_matrix_tensor_3d_factorization(bad, y, 3)
    with pytest.raises(ValueError, match="rank"):
        tenfold.coupled_matrix_tensor_3d_factorization(x, y, 0)


def test_tensorly_suites_pass_with_the_patch(tmp_path):
    """TensorLy's test_parafac2.py and test_cmtf_als.py pass with the patch; at least 90 % of
    the calls that reach parafac2 and coupled_matrix_tensor_3d_factorization run natively."""
    counts = run_tensorly_suites(tmp_path, ("test_parafac2.py", "test_cmtf_als.py"))
    native, fallback = native_share(counts, FUNCTIONS)
    assert native >= 0.9 * (native + fallback)
    assert all(counts["native_by_function"].get(f, 0) > 0 for f in FUNCTIONS)


def test_patch_serves_both_and_unpatch_restores():
    import tensorly.decomposition as dec
    from tensorly.decomposition import _cmtf_als, _parafac2

    originals = (_parafac2.parafac2, _cmtf_als.coupled_matrix_tensor_3d_factorization)
    tt.patch()
    try:
        assert dec.parafac2 is not originals[0]
        assert dec.coupled_matrix_tensor_3d_factorization is not originals[1]
        assert dec.parafac2.__wrapped__ is originals[0]
    finally:
        tt.unpatch()
    assert dec.parafac2 is originals[0]
    assert dec.coupled_matrix_tensor_3d_factorization is originals[1]
