"""CP-ALS of complex tensors (complex64/complex128): planted recovery, agreement with
TensorLy's parafac from the same start, the patch serving complex calls, and the options
that are refused for them."""

import numpy as np
import pytest

import tenfold


def planted(shape, rank, dtype=np.complex128, seed=0, noise=0.0):
    rng = np.random.default_rng(seed)
    factors = [rng.standard_normal((s, rank)) + 1j * rng.standard_normal((s, rank)) for s in shape]
    x = np.einsum("ir,jr,kr->ijk", *factors)
    if noise:
        x = x + noise * (rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape))
    return x.astype(dtype), factors


def full(weights, factors):
    return np.einsum("r,ir,jr,kr->ijk", weights, *factors)


def rel_error(x, weights, factors):
    return np.linalg.norm(x - full(weights, factors)) / np.linalg.norm(x)


@pytest.mark.parametrize("dtype,tol", [(np.complex128, 1e-8), (np.complex64, 1e-3)])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("init", ["svd", "random"])
def test_planted_complex_model_is_recovered(dtype, tol, order, init):
    x, truth = planted((9, 8, 7), 3, dtype)
    x = np.asarray(x, order=order)
    r = tenfold.parafac(x, 3, init=init, tol=1e-14, n_iter_max=1000, random_state=1,
                        n_starts=1 if init == "svd" else 4)
    assert r.factors[0].dtype == dtype and r.weights.dtype == dtype
    assert np.all(r.weights.imag == 0) and np.all(r.weights.real > 0)
    assert rel_error(x.astype(np.complex128), r.weights, r.factors) < tol
    assert abs(r.relative_error - rel_error(x.astype(np.complex128), r.weights, r.factors)) < tol
    # Each true component is matched up to phase and scale in every axis.
    for a, b in zip(truth, r.factors):
        cos = np.abs(a.conj().T @ b) / np.outer(np.linalg.norm(a, axis=0), np.linalg.norm(b, axis=0))
        assert cos.max(axis=1).min() > 1 - 10 * tol


def test_tensorly_callback_sees_the_complex_model():
    x, _ = planted((6, 5, 4), 2, noise=0.01)
    seen = []

    def callback(cp, rec_error):
        weights, factors = cp
        seen.append((rec_error, rel_error(x, weights, factors)))

    tenfold.parafac(x, 2, n_iter_max=5, tol=0, callback=callback)
    assert len(seen) == 5
    for reported, actual in seen:
        assert abs(reported - actual) < 1e-10


def test_complex_options_that_have_no_meaning_are_refused():
    x, _ = planted((5, 4, 3), 1)
    with pytest.raises(ValueError, match="nonnegative has no meaning for a complex tensor"):
        tenfold.non_negative_parafac_hals(x, 1)
    with pytest.raises(ValueError, match="compress = on is not available for a complex tensor"):
        tenfold.parafac(x, 1, compress="on")
    with pytest.raises(ValueError, match="mask is not available for a complex tensor"):
        tenfold.parafac(x, 1, mask=np.ones(x.shape, dtype=bool))
    with pytest.raises(ValueError, match="cpu backend only"):
        tenfold.parafac(x, 1, backend="reference")
    with pytest.raises(TypeError, match="would drop its imaginary part"):
        tenfold.parafac(x, 1, dtype=np.float64)
    with pytest.raises(TypeError, match="has dtype complex128"):
        tenfold.tucker(x, rank=1)


tl = pytest.importorskip("tensorly")


@pytest.mark.parametrize("normalize_factors", [False, True])
@pytest.mark.parametrize("shape,rank", [((6, 8, 7), 3), ((5, 4, 6, 3), 2)])
def test_matches_tensorly_from_the_same_start(shape, rank, normalize_factors):
    from tensorly.decomposition._cp import parafac as tl_parafac

    rng = np.random.default_rng(7)
    factors = [rng.random((s, rank)) + 1j * rng.random((s, rank)) for s in shape]
    x = tl.cp_to_tensor((None, factors))
    x = x + 0.05 * (rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape))
    start = [rng.random((s, rank)) + 1j * rng.random((s, rank)) for s in shape]
    ref, ref_errors = tl_parafac(x, rank, init=tl.cp_tensor.CPTensor((None, start)), tol=0,
                                 n_iter_max=25, normalize_factors=normalize_factors,
                                 return_errors=True)
    res, errors = tenfold.parafac(x, rank, init=(None, start), tol=0, n_iter_max=25,
                                  normalize_factors=normalize_factors, return_errors=True)
    # TensorLy's test tolerances (decimal=6 on the errors) and the same model.
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(tl.cp_to_tensor(tuple(res)), tl.cp_to_tensor(ref),
                               atol=1e-8 * np.abs(x).max())


@pytest.fixture
def patched():
    import tenfold.tensorly as tt

    tt.unpatch()
    tt.reset_calls()
    tt.patch()
    yield tt
    tt.unpatch()


@pytest.mark.parametrize("init", ["svd", "random"])
def test_patch_serves_complex_parafac_natively(patched, init):
    from tensorly.decomposition import parafac, tucker

    x, _ = planted((6, 8, 7), 3, noise=0.01, seed=3)
    cp, errors = parafac(x, 4, init=init, random_state=5, tol=1e-6, n_iter_max=70,
                         return_errors=True)
    ref, ref_errors = parafac.__wrapped__(x, 4, init=init, random_state=5, tol=1e-6,
                                          n_iter_max=70, return_errors=True)
    assert len(errors) == len(ref_errors)
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(tl.cp_to_tensor(cp), tl.cp_to_tensor(ref),
                               atol=1e-6 * np.abs(x).max())
    tucker(x, [2, 2, 2], n_iter_max=3)
    c = patched.calls()
    assert c["native"] == 1 and c["fallback"] == 1
    assert "tucker: dtype complex128" in c["reasons"]
