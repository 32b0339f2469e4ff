"""tensor_train and non-negative Tucker: against TensorLy from the same data and start, bad
input, and TensorLy's own tests of them with tenfold.tensorly.patch() applied."""

import numpy as np
import pytest

import tenfold

tl = pytest.importorskip("tensorly")
import tenfold.tensorly as tt  # noqa: E402
from test_tensorly_patch import fresh_patch, native_share, run_tensorly_suites  # noqa: E402, F401

OURS = ("tensor_train", "non_negative_tucker", "non_negative_tucker_hals")


# --- tensor train -------------------------------------------------------------------

@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype,digits", [(np.float64, 1e-11), (np.float32, 2e-4)])
def test_tensor_train_is_tensorlys(order, dtype, digits):
    """The cores of TensorLy's TT-SVD (its signs too) from the Grams' eigenvectors."""
    from tensorly.decomposition import tensor_train

    x = np.asarray(np.random.default_rng(0).random((6, 7, 8, 5)), dtype=dtype, order=order)
    rank = [1, 4, 6, 3, 1]
    ours, ref = tenfold.tensor_train(x, rank=rank), tensor_train(x, rank)
    assert ours.rank == tuple(ref.rank) == tuple(rank)
    for a, b in zip(ours, ref):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, rtol=0, atol=digits * np.abs(b).max())
    err = np.linalg.norm(tl.tt_to_tensor(ours) - x) / np.linalg.norm(x)
    assert abs(ours.relative_error - err) < (1e-12 if dtype == np.float64 else 1e-5)


def test_tensor_train_exact_and_tol():
    rng = np.random.default_rng(1)
    cores = [rng.standard_normal(s) for s in [(1, 5, 2), (2, 6, 3), (3, 4, 2), (2, 7, 1)]]
    x = tl.tt_to_tensor(cores)
    r = tenfold.tensor_train(x, rank=[1, 2, 3, 2, 1])
    assert np.linalg.norm(tl.tt_to_tensor(r) - x) / np.linalg.norm(x) < 1e-12
    assert r.relative_error < 1e-12
    # tol: the bound holds, and the exact ranks are found
    t = tenfold.tensor_train(x, tol=1e-6)
    assert t.rank == (1, 2, 3, 2, 1)
    noisy = x + 0.05 * np.linalg.norm(x) / np.sqrt(x.size) * rng.standard_normal(x.shape)
    for tol in (0.02, 0.2):
        t = tenfold.tensor_train(noisy, tol=tol)
        assert np.linalg.norm(tl.tt_to_tensor(t) - noisy) / np.linalg.norm(noisy) <= tol


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_tt_norm_inner_and_full_from_the_cores(dtype, tol):
    rng = np.random.default_rng(6)
    shape = (4, 3, 5, 2)
    a = [rng.standard_normal(s).astype(dtype) for s in [(1, 4, 3), (3, 3, 2), (2, 5, 4), (4, 2, 1)]]
    b = [rng.standard_normal(s).astype(dtype) for s in [(1, 4, 2), (2, 3, 2), (2, 5, 2), (2, 2, 1)]]
    fa, fb = tl.tt_to_tensor(a), tl.tt_to_tensor(b)
    x = rng.standard_normal(shape).astype(dtype)
    np.testing.assert_allclose(tenfold.tt_to_tensor(a), fa, rtol=0, atol=tol * np.abs(fa).max())
    assert abs(tenfold.tt_norm(a) - np.linalg.norm(fa)) <= tol * np.linalg.norm(fa)
    scale = np.linalg.norm(fa) * np.linalg.norm(fb)
    assert abs(tenfold.tt_inner(a, b) - np.vdot(fa, fb)) <= tol * scale
    assert abs(tenfold.tt_inner(a, np.asfortranarray(x)) - np.vdot(fa, x)) <= (
        tol * np.linalg.norm(fa) * np.linalg.norm(x))
    r = tenfold.tensor_train(x.astype(np.float64), rank=3)
    assert abs(r.norm() - np.linalg.norm(r.full())) < 1e-12 * np.linalg.norm(x)
    with pytest.raises(ValueError, match="do not chain"):
        tenfold.tt_norm([a[0], a[2], a[1], a[3]])
    with pytest.raises(ValueError, match=r"the tensor has shape \(4, 3\)"):
        tenfold.tt_inner(a, x[:, :, 0, 0])


def test_tensor_train_matrix_is_tensorlys():
    from tensorly.decomposition import tensor_train_matrix

    x = np.random.default_rng(2).random((2, 3, 4, 3, 2, 5))
    ours, ref = tenfold.tensor_train_matrix(x, 4), tensor_train_matrix(x, 4)
    assert [g.shape for g in ours] == [g.shape for g in ref]
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-11 * np.abs(b).max())


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(rank=[1, 2, 1]), ValueError, "rank has 3 entries, but a tensor train of a tensor "
                                       "with 3 axes has 4"),
    (dict(rank=[1, 0, 2, 1]), ValueError, r"rank\[1\] must be at least 1, got 0"),
    (dict(rank=-2), ValueError, "rank must be at least 1, got -2"),
    (dict(rank=[2, 2, 2, 1]), ValueError, "must start and end with 1"),
    (dict(rank=2.5), TypeError, "rank must be an int"),
    (dict(tol=1.5), ValueError, r"tol must be in \(0, 1\)"),
    (dict(tol=float("nan")), ValueError, r"tol must be in \(0, 1\)"),
    (dict(rank=2, tol=0.1), ValueError, "give exactly one of rank and tol"),
])
def test_tensor_train_bad_input(kwargs, error, match):
    x = np.random.default_rng(3).random((3, 4, 5))
    before = x.copy()
    with pytest.raises(error, match=match):
        tenfold.tensor_train(x, **kwargs)
    np.testing.assert_array_equal(x, before)


def test_tensor_train_names_a_nan_by_numpy_index():
    x = np.random.default_rng(3).random((3, 4, 5))
    x[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match=r"NumPy index \[1, 2, 3\]"):
        tenfold.tensor_train(x, rank=2)


def test_tensor_train_huge_rank_is_clipped():
    x = np.random.default_rng(4).random((3, 4, 5))
    assert tenfold.tensor_train(x, rank=10**30).rank == (1, 3, 5, 1)


# --- non-negative Tucker ---------------------------------------------------------------

def _nonnegative_problem(shape=(9, 8, 7), ranks=(3, 4, 2), seed=5):
    rng = np.random.default_rng(seed)
    core = rng.random(ranks)
    factors = [rng.random((s, r)) for s, r in zip(shape, ranks)]
    x = tl.tucker_to_tensor((core, factors))
    return np.abs(x + 0.05 * x.std() * rng.standard_normal(shape))


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("hals", [False, True, "active_set"])
@pytest.mark.parametrize("normalize", [False, True])
def test_nn_tucker_is_tensorlys_from_the_same_start(order, hals, normalize):
    """TensorLy's iterates: the same errors (to 1e-9) and model from TensorLy's start."""
    from tensorly.decomposition import non_negative_tucker, non_negative_tucker_hals
    from tensorly.decomposition._tucker import initialize_tucker

    x = np.asarray(_nonnegative_problem(), order=order)
    ranks = [3, 4, 2]
    # The active set solves the core's normal equations, whose matrix is the Kronecker
    # product of the Grams: from the NNDSVD start HALS drives a factor column to (nearly)
    # zero, the condition grows past 1e14 and the core is determined only to that times
    # eps (both codes then agree on the errors to about 1e-8 only). From TensorLy's random
    # start the condition stays near 1e4 and the iterates agree to rounding.
    init = "random" if hals == "active_set" else "svd"
    start = initialize_tucker(x, ranks, range(3), init=init, random_state=0, non_negative=True)
    direct = tenfold.non_negative_tucker_hals if hals else tenfold.non_negative_tucker
    reference = non_negative_tucker_hals if hals else non_negative_tucker
    kw = dict(n_iter_max=25, tol=1e-12, normalize_factors=normalize, return_errors=True)
    if hals == "active_set":
        kw["algorithm"] = "active_set"
    ours, errors = direct(x, ranks, init=(start[0].copy(), [f.copy() for f in start[1]]), **kw)
    ref, ref_errors = reference(x, ranks, init=init, random_state=0, **kw)
    if hals == "active_set":
        assert np.prod([np.linalg.cond(f.T @ f) for f in ref.factors]) < 1e5
    assert len(errors) == len(ref_errors)
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-9)
    np.testing.assert_allclose(tl.tucker_to_tensor(ours), tl.tucker_to_tensor(ref), rtol=0,
                               atol=1e-8 * np.abs(x).max())
    assert ours.iterations == len(errors) and ours.relative_error == errors[-1]
    assert min(ours.core.min(), *(f.min() for f in ours.factors)) >= 0


def test_nn_tucker_hals_inner_passes_stop_as_tensorlys():
    """TensorLy's hals_nnls measures a pass's change with a broadcast (V - newV over all rows):
    here that keeps its third mode at 5 passes where the change of U alone would stop at 2,
    which moves the errors by 5e-6 (relative) and that factor by 1e-3; Tenfold measures as
    TensorLy does. What remains is rounding on a badly scaled start: NNDSVD's core here is
    about 1e12 against factor entries near 1e-10, so each HALS numerator is a difference of
    terms near 1e25, and the errors agree to about 1e-8."""
    from tensorly.decomposition import non_negative_tucker_hals
    from tensorly.decomposition._tucker import initialize_tucker

    rng = np.random.default_rng(0)
    shape, rank = (40, 40, 40), 5
    x = tl.tucker_to_tensor((rng.random((rank,) * 3), [rng.random((s, rank)) for s in shape]))
    x = np.abs(x + 0.1 * rng.standard_normal(shape))
    start = initialize_tucker(x, [rank] * 3, range(3), init="svd", random_state=0,
                              non_negative=True)
    kw = dict(n_iter_max=5, tol=0, return_errors=True)
    ours, errors = tenfold.non_negative_tucker_hals(x, [rank] * 3, init=start, **kw)
    ref, ref_errors = non_negative_tucker_hals(x, [rank] * 3, init=start, **kw)
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-7)
    np.testing.assert_allclose(tl.tucker_to_tensor(ours), tl.tucker_to_tensor(ref), rtol=0,
                               atol=1e-7 * np.abs(x).max())


def test_nn_tucker_float32_and_random_start():
    x = _nonnegative_problem().astype(np.float32)
    r = tenfold.non_negative_tucker_hals(x, [3, 4, 2], init="random", random_state=1,
                                         n_iter_max=50)
    assert r.core.dtype == np.float32 and r.relative_error < 0.1
    d = tenfold.non_negative_tucker_hals(x.astype(np.float64), [3, 4, 2], init="random",
                                         random_state=1, n_iter_max=50)
    assert abs(r.relative_error - d.relative_error) < 1e-4
    # A NumPy generator draws TensorLy's random start
    a = tenfold.non_negative_tucker(x, 2, init="random", random_state=np.random.RandomState(3),
                                    n_iter_max=3)
    b = tenfold.non_negative_tucker(x, 2, init="random", random_state=np.random.RandomState(3),
                                    n_iter_max=3)
    np.testing.assert_array_equal(a.core, b.core)
    assert "NonNegativeTuckerResult(shape=(9, 8, 7), rank=(2, 2, 2)" in repr(a)


@pytest.mark.parametrize("call,error,match", [
    (lambda x: tenfold.non_negative_tucker(x, [2, 2]), ValueError, "rank has 2 entries"),
    (lambda x: tenfold.non_negative_tucker(x, [2, 0, 2]), ValueError,
     r"rank\[1\] must be at least 1, got 0"),
    (lambda x: tenfold.non_negative_tucker(x, [2, 9, 2]), ValueError,
     r"rank\[1\] = 9 exceeds 8"),
    (lambda x: tenfold.non_negative_tucker(x, 2, tol=-1), ValueError, "tol must be finite"),
    (lambda x: tenfold.non_negative_tucker(x, 2, n_iter_max=-1), ValueError,
     "n_iter_max must be at least 0"),
    (lambda x: tenfold.non_negative_tucker(x, 2, init="nndsvd"), ValueError, "init must be"),
    (lambda x: tenfold.non_negative_tucker(
        x, 2, init=(-np.ones((2, 2, 2)), [np.ones((s, 2)) for s in x.shape])), ValueError,
     "negative entry"),
    (lambda x: tenfold.non_negative_tucker(
        x, 2, init=(np.ones((2, 2, 2)), [np.ones((s, 3)) for s in x.shape])), ValueError,
     r"init factor 0 has shape \(9, 3\), expected \(9, 2\)"),
    (lambda x: tenfold.non_negative_tucker_hals(x, 2, algorithm="lbfgs"), ValueError,
     "algorithm must be 'fista' or 'active_set'"),
    (lambda x: tenfold.non_negative_tucker_hals(x, 2, sparsity_coefficients=[1, 0, 0]),
     ValueError, "sparsity_coefficients is not supported"),
    (lambda x: tenfold.non_negative_tucker_hals(x, 2, fixed_modes=[0]), ValueError,
     "fixed_modes is not supported"),
])
def test_nn_tucker_bad_input(call, error, match):
    x = _nonnegative_problem()
    before = x.copy()
    with pytest.raises(error, match=match):
        call(x)
    np.testing.assert_array_equal(x, before)


# --- the patch -----------------------------------------------------------------------------

def test_patch_serves_them_with_tensorlys_output(fresh_patch, capsys):
    from tensorly.decomposition import (non_negative_tucker, non_negative_tucker_hals,
                                        tensor_train)

    x = _nonnegative_problem()
    out = tensor_train(x, 3, verbose=True)
    assert type(out).__name__ == "TTTensor" and out.rank == (1, 3, 3, 1)
    printed = capsys.readouterr().out
    assert "TT factor 0 computed with shape (1, 9, 3)" in printed
    for fn in (non_negative_tucker, non_negative_tucker_hals):
        got, errors = fn(x, [3, 4, 2], n_iter_max=6, tol=0, return_errors=True, verbose=True)
        ref, ref_errors = fn.__wrapped__(x, [3, 4, 2], n_iter_max=6, tol=0, return_errors=True,
                                         verbose=True)
        np.testing.assert_allclose(errors, ref_errors, rtol=1e-9)
        ours_printed, theirs_printed = _two_prints(capsys)
        assert ours_printed.count("reconstruction error=") == 4
        assert theirs_printed.count("reconstruction error=") == 4
    c = tt.calls()
    assert c["native"] == 3 and c["fallback"] == 0


def _two_prints(capsys):
    text = capsys.readouterr().out
    lines = text.splitlines()
    return "\n".join(lines[:len(lines) // 2]), "\n".join(lines[len(lines) // 2:])


@pytest.mark.parametrize("kwargs,reason", [
    (dict(exact=True), "exact"),
    (dict(sparsity_coefficients=[0.1, None, None]), "sparsity coefficients"),
])
def test_patch_falls_back_where_it_cannot_serve(fresh_patch, kwargs, reason):
    from tensorly.decomposition import non_negative_tucker_hals

    non_negative_tucker_hals(_nonnegative_problem(), 2, n_iter_max=3, **kwargs)
    assert tt.calls()["reasons"] == {f"non_negative_tucker_hals: {reason}": 1}


def test_tensorly_tt_and_nn_tucker_suites_pass_with_the_patch(tmp_path):
    """TensorLy's test_tt_decomposition.py and the non-negative Tucker tests of its
    test_tucker.py pass patched; at least 90 % of the calls reaching the three functions
    run natively."""
    counts = run_tensorly_suites(tmp_path, ("test_tt_decomposition.py", "test_tucker.py"),
                                 ["test_tt_decomposition.py", "test_tucker.py::test_non_negative_tucker",
                                  "test_tucker.py::test_non_negative_tucker_hals_active_set"])
    native, fallback = native_share(counts, OURS)
    print(f"tensor_train / non_negative_tucker / non_negative_tucker_hals: {native} native, "
          f"{fallback} fallback")
    assert native >= 0.9 * (native + fallback)
