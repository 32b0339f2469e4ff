"""tenfold.parafac: result shape and semantics, dtypes and memory orders, the copy rule,
the documented errors, and the start options."""

import pickle

import numpy as np
import pytest

import tenfold
from conftest import planted


def reconstruct(weights, factors):
    letters = "abcdefgh"[: len(factors)]
    spec = ",".join(c + "r" for c in letters) + ",r->" + letters
    return np.einsum(spec, *factors, weights)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_planted_problem_is_recovered_in_both_precisions(dtype):
    x, _ = planted((30, 20, 10), 3, seed=1, dtype=dtype)
    r = tenfold.parafac(x, 3, n_iter_max=500, tol=1e-12)
    weights, factors = r
    assert weights.dtype == dtype and all(f.dtype == dtype for f in factors)
    assert [f.shape for f in factors] == [(30, 3), (20, 3), (10, 3)]
    # Fit to the precision's round-off: 1e-5 in float32, 1e-9 in float64.
    assert r.fit > 1 - (1e-5 if dtype == np.float32 else 1e-9)
    err = np.linalg.norm(reconstruct(weights, factors) - x) / np.linalg.norm(x)
    assert err == pytest.approx(r.relative_error, abs=1e-5 if dtype == np.float32 else 1e-9)
    assert r.fit == pytest.approx(1 - r.relative_error)
    assert r.iterations == len(r.fit_history) and r.converged and r.stop == "converged"
    assert r.init == "nvecs" and r.timings["total"] > 0


@pytest.mark.parametrize("dtype, scales", [(np.float64, [1e-300, 1e-200, 1e-150, 1e150, 1e300]),
                                           (np.float32, [1e-37, 1e-21, 1e30])])
def test_extreme_magnitudes_give_the_fit_at_one(dtype, scales):
    # A noisy rank-2 tensor at 1e-200 used to give an all-zero model with fit 1.0.
    x, _ = planted((6, 5, 4), 2, seed=3, noise=0.2)
    want = tenfold.parafac(x.astype(dtype), 2, n_iter_max=30, tol=0)
    assert want.fit < 0.99
    for s in scales:
        got = tenfold.parafac((x * s).astype(dtype), 2, n_iter_max=30, tol=0)
        assert got.fit == pytest.approx(want.fit, abs=1e-4 if dtype == np.float32 else 1e-10)
        np.testing.assert_allclose(got.weights / s, want.weights,
                                   rtol=1e-2 if dtype == np.float32 else 1e-7)


@pytest.mark.parametrize("order", ["C", "F"])
def test_gevd_start_on_the_compressed_core(order):
    # Exact rank 5: the algebraic start is the planted model, so one sweep reaches fit 1
    # (a random start does not), in either memory order (axes 0 and 1 are NumPy's).
    x, _ = planted((40, 30, 20), 5, seed=4)
    x = np.asarray(x, order=order)
    r = tenfold.parafac(x, 5, init="gevd", n_iter_max=1, compress="on", n_starts=1)
    assert r.init == "gevd" and r.fit > 1 - 1e-6  # the fit formula: about sqrt(eps)
    assert tenfold.parafac(x, 5, init="random", n_iter_max=1, compress="on").fit < 0.99
    # automatic picks it where it applies
    assert tenfold.parafac(x, 5, init="auto", compress="on", n_starts=1).init == "gevd"
    with pytest.raises(ValueError, match="init = gevd needs a 3-way tensor whose first two axes"):
        tenfold.parafac(x[:3], 4, init="gevd", compress="on")
    with pytest.raises(ValueError, match="init = gevd starts on the compressed core"):
        tenfold.parafac(x, 4, init="gevd", compress="off")


def test_c_and_fortran_order_give_the_same_bits(covid):
    c = tenfold.parafac(covid, 4, n_iter_max=30, init="random", random_state=5)
    f = tenfold.parafac(np.asfortranarray(covid), 4, n_iter_max=30, init="random",
                        random_state=5)
    np.testing.assert_array_equal(c.weights, f.weights)
    for a, b in zip(c.factors, f.factors):
        np.testing.assert_array_equal(a, b)
    assert c.fit_history.tolist() == f.fit_history.tolist()


def test_other_layouts_and_dtypes_are_copied_once_with_the_same_result(covid):
    ref = tenfold.parafac(covid, 3, n_iter_max=20)
    strided = np.zeros((438, 12, 11))
    strided[:, ::2, :] = covid
    view = strided[:, ::2, :]
    assert not (view.flags.c_contiguous or view.flags.f_contiguous)
    r = tenfold.parafac(view, 3, n_iter_max=20)
    np.testing.assert_array_equal(r.weights, ref.weights)
    # Integers become float64; dtype= chooses the precision.
    ints = np.arange(24).reshape(2, 3, 4) % 5
    assert tenfold.parafac(ints, 2).weights.dtype == np.float64
    assert tenfold.parafac(covid, 2, dtype=np.float32).weights.dtype == np.float32
    assert tenfold.parafac(covid.tolist(), 2).weights.dtype == np.float64


def test_input_untouched_and_results_own_their_memory(covid):
    x = covid.copy()
    r = tenfold.parafac(x, 3, n_iter_max=10)
    np.testing.assert_array_equal(x, covid)
    for a in (r.weights, *r.factors, r.fit_history):
        assert not np.shares_memory(a, x)
        a[...] = a  # writable
    weights, factors = r
    del r
    np.testing.assert_array_equal(weights, weights.copy())
    assert np.isfinite(factors[0]).all()


def test_result_pickles_with_its_attributes(covid):
    r = tenfold.parafac(covid, 2, n_iter_max=5)
    back = pickle.loads(pickle.dumps(r))
    assert type(back) is tenfold.CPResult and back.fit == r.fit and back.stop == r.stop
    np.testing.assert_array_equal(back.factors[2], r.factors[2])
    t = tenfold.tucker(covid, rank=2)
    assert pickle.loads(pickle.dumps(t)).relative_error == t.relative_error


def test_given_start_in_numpy_axis_order_and_random_state(covid):
    rng = np.random.default_rng(0)
    start = [rng.random((n, 3)) for n in covid.shape]
    a = tenfold.parafac(covid, 3, init=(None, start), n_iter_max=5, tol=0)
    b = tenfold.parafac(covid, 3, init=(np.ones(3), start), n_iter_max=5, tol=0)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert a.init == "given" and a.iterations == 5
    # The weights of a start are folded into its first factor.
    w = np.array([2.0, 1.0, 0.5])
    c = tenfold.parafac(covid, 3, init=(w, start), n_iter_max=5, tol=0)
    d = tenfold.parafac(covid, 3, init=(None, [start[0] * w, *start[1:]]), n_iter_max=5, tol=0)
    np.testing.assert_array_equal(c.weights, d.weights)
    r1 = tenfold.parafac(covid, 3, init="random", random_state=7, n_iter_max=5)
    r2 = tenfold.parafac(covid, 3, init="random", random_state=7, n_iter_max=5)
    r3 = tenfold.parafac(covid, 3, init="random", random_state=8, n_iter_max=5)
    np.testing.assert_array_equal(r1.weights, r2.weights)
    assert not np.array_equal(r1.weights, r3.weights)
    assert tenfold.parafac(covid, 3, init="svd").init == "nvecs"


def test_normalize_factors_false_keeps_the_model(covid):
    n = tenfold.parafac(covid, 3, n_iter_max=10)
    u = tenfold.parafac(covid, 3, n_iter_max=10, normalize_factors=False)
    np.testing.assert_array_equal(u.weights, np.ones(3))
    np.testing.assert_allclose(reconstruct(*u), reconstruct(*n), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(n.factors[1], axis=0), 1, rtol=1e-12)
    assert np.all(np.diff(n.weights) <= 0)


def test_callback_sees_every_iteration_and_can_stop(covid):
    seen = []
    r = tenfold.parafac(covid, 3, n_iter_max=50, tol=0,
                        callback=lambda p: seen.append(p) or p.iteration == 4)
    assert [p.iteration for p in seen] == [1, 2, 3, 4]
    assert r.iterations == 4 and r.stop == "callback" and not r.converged
    assert seen[-1].fit == r.fit_history[-1] and seen[0].delta == seen[0].fit

    def boom(p):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        tenfold.parafac(covid, 3, callback=boom)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(rank=0), ValueError, "rank"),
        (dict(rank=10**6), ValueError, "rank"),
        (dict(rank=2, n_iter_max=-1), ValueError, "iter"),
        (dict(rank=2, tol=-1), ValueError, "tol"),
        (dict(rank=2, init="bogus"), ValueError, "init"),
        (dict(rank=2, backend="tpu"), ValueError, "tpu"),
        (dict(rank=2, dtype=np.int32), ValueError, "float32 or float64"),
        (dict(rank=2, random_state=-1), ValueError, "random_state"),
        (dict(rank=2, init=(None, [np.ones((5, 2))] * 3)), ValueError, "factor"),
        (dict(rank=2, init=(None, [np.ones((438, 2))] * 2)), ValueError, "2 factors"),
    ],
)
def test_documented_errors(covid, kwargs, error, message):
    with pytest.raises(error, match=message):
        tenfold.parafac(covid, **kwargs)


def test_bad_tensors():
    with pytest.raises(ValueError, match="at least 2 axes"):
        tenfold.parafac(np.ones(5), 1)
    x = np.ones((3, 4, 5))
    x[1, 2, 3] = np.nan
    for order in ("C", "F"):
        with pytest.raises(ValueError, match=r"NaN\) at NumPy index \[1, 2, 3\]"):
            tenfold.parafac(np.asarray(x, order=order), 1)
    x[1, 2, 3] = -np.inf
    with pytest.raises(ValueError, match=r"Inf\) at NumPy index \[1, 2, 3\]"):
        tenfold.tucker(x, rank=1)
    with pytest.raises(TypeError, match="complex"):
        tenfold.parafac(np.ones((3, 4), dtype=np.clongdouble), 1)
    with pytest.raises(TypeError, match="object"):
        tenfold.parafac(np.array([[1, None]], dtype=object), 1)


def test_cuda_backend_raises_device_error_without_a_device(covid):
    if tenfold.cuda_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(tenfold.DeviceError):
        tenfold.parafac(covid, 2, backend="cuda")
    assert issubclass(tenfold.DeviceError, RuntimeError)


def test_overflow_raises_numerical_error():
    # Entries near the top of float32's range: the weight 6 * 3e38 cannot be represented.
    with pytest.raises(tenfold.NumericalError, match="exceed the range of float"):
        tenfold.parafac(np.full((4, 3, 3), 3e38, dtype=np.float32), 1)
    assert issubclass(tenfold.NumericalError, ArithmeticError)
