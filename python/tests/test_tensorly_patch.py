"""tenfold.tensorly.patch(): TensorLy's own CP and Tucker tests with the patch applied, and
the fallback rule (a call Tenfold cannot serve exactly runs TensorLy's original)."""

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

tl = pytest.importorskip("tensorly")
import tenfold  # noqa: E402
import tenfold.tensorly as tt  # noqa: E402
from tenfold import _tensorly_args  # noqa: E402

SUITES = ("test_cp.py", "test_tucker.py")

CONFTEST = '''
import json, os
import tenfold.tensorly
tenfold.tensorly.patch()

def pytest_sessionfinish(session):
    with open(os.environ["TENFOLD_CALLS_JSON"], "w") as f:
        json.dump(tenfold.tensorly.calls(), f)
'''


def absolute_imports(source):
    """TensorLy's test module with its relative imports made absolute (nothing else changed)."""
    source = re.sub(r"^from \.\.\. import ", "from tensorly import ", source, flags=re.M)
    source = re.sub(r"^from \.\.\.(\w)", r"from tensorly.\1", source, flags=re.M)
    return re.sub(r"^from \.\.(\w)", r"from tensorly.decomposition.\1", source, flags=re.M)


def test_absolute_imports():
    assert absolute_imports("from .._cp import (\nfrom ...random import x\nfrom ... import backend as T\n") == (
        "from tensorly.decomposition._cp import (\nfrom tensorly.random import x\n"
        "from tensorly import backend as T\n")


@pytest.fixture
def fresh_patch():
    tt.unpatch()
    tt.reset_calls()
    tt.patch()
    yield
    tt.unpatch()


def run_tensorly_suites(tmp_path, files, items=None):
    """TensorLy's own test `files` (from the installed package, imports made absolute)
    run patched in a subprocess, all of them or the `items` given (file::test); asserts
    they pass and returns the patch's call counts (tenfold.tensorly.calls())."""
    tests = Path(tl.__file__).parent / "decomposition" / "tests"
    for name in files:
        (tmp_path / name).write_text(absolute_imports((tests / name).read_text()))
    (tmp_path / "conftest.py").write_text(CONFTEST)
    calls = tmp_path / "calls.json"
    env = dict(os.environ, TENFOLD_CALLS_JSON=str(calls),
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-W", "ignore", *(items or [str(tmp_path)])], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    counts = json.loads(calls.read_text())
    print(json.dumps(counts, indent=1))
    return counts


def native_share(counts, functions):
    """(native, fallback) calls of `functions` in the patch's counts."""
    native = sum(counts["native_by_function"].get(f, 0) for f in functions)
    fallback = sum(n for reason, n in counts["reasons"].items() if reason.split(":")[0] in functions)
    return native, fallback


def test_tensorly_suites_pass_with_the_patch(tmp_path):
    """Every item of TensorLy's test_cp.py and test_tucker.py passes with the patch."""
    counts = run_tensorly_suites(tmp_path, SUITES)
    assert counts["native"] > 0


def test_patch_replaces_and_unpatch_restores(fresh_patch):
    from tensorly.decomposition import _cp, _nn_cp, _tucker
    import tensorly.decomposition as dec

    assert dec.parafac is _cp.parafac and dec.parafac.__wrapped__ is not None
    assert dec.tucker is _tucker.tucker and dec.non_negative_parafac_hals is _nn_cp.non_negative_parafac_hals
    original = dec.parafac.__wrapped__
    tt.unpatch()
    assert dec.parafac is original and _cp.parafac is original and not tt.patched()


def test_native_call_matches_tensorly_from_the_same_start(fresh_patch):
    from tensorly.decomposition import parafac

    rng = np.random.default_rng(3)
    x = np.einsum("ir,jr,kr->ijk", *(rng.random((s, 3)) for s in (9, 8, 7)))
    x = x + 0.01 * rng.standard_normal(x.shape)
    cp, errors = parafac(x, 3, init="random", random_state=5, tol=1e-10, n_iter_max=40,
                         return_errors=True)
    assert tt.calls()["native"] == 1
    ref, ref_errors = parafac.__wrapped__(x, 3, init="random", random_state=5, tol=1e-10,
                                          n_iter_max=40, return_errors=True)
    assert len(errors) == len(ref_errors)
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(tl.cp_to_tensor(cp), tl.cp_to_tensor(ref), rtol=0, atol=1e-8 * np.abs(x).max())


def test_native_call_is_one_uncompressed_start_at_scale(fresh_patch):
    """Where the direct API compresses and runs several starts by default (2^20 entries,
    core 8x smaller), the patch keeps TensorLy's meaning: one ALS run from its start."""
    from tensorly.decomposition import parafac

    rng = np.random.default_rng(4)
    x = np.einsum("ir,jr,kr->ijk", *(rng.standard_normal((s, 3)) for s in (128, 128, 64)))
    x = x + 0.05 * np.linalg.norm(x) / np.sqrt(x.size) * rng.standard_normal(x.shape)
    assert tenfold.parafac(x, 3, n_iter_max=3).compressed  # the direct API's default
    kwargs = dict(init="random", random_state=1, tol=0, n_iter_max=3, return_errors=True)
    _, errors = parafac(x, 3, **kwargs)
    assert tt.calls()["native"] == 1
    _, ref_errors = parafac.__wrapped__(x, 3, **kwargs)
    assert len(errors) == len(ref_errors) == 3
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-6)


@pytest.mark.parametrize("orthogonalise,qr_sweeps", [(True, 2), (3, 4), (0, 0), (1.0, 40)])
def test_orthogonalise_matches_tensorly_from_the_same_start(fresh_patch, orthogonalise,
                                                             qr_sweeps):
    """TensorLy takes the QR of the factors at its iterations 0..orthogonalise (True is 1;
    a true value that is not an int: every iteration); well-conditioned factors (rank
    below the tensor's) make its Q, and so the run, determined to rounding."""
    from tensorly.decomposition import parafac

    assert _tensorly_args.orthogonalised_sweeps(orthogonalise, 40) == qr_sweeps
    rng = np.random.default_rng(4)
    x = np.einsum("ir,jr,kr->ijk", *(rng.standard_normal((s, 4)) for s in (9, 8, 7)))
    x = x + 0.1 * rng.standard_normal(x.shape)
    kw = dict(init="random", random_state=5, tol=0, n_iter_max=40, return_errors=True,
              orthogonalise=orthogonalise)
    cp, errors = parafac(x, 3, **kw)
    assert tt.calls()["native"] == 1
    ref, ref_errors = parafac.__wrapped__(x, 3, **kw)
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-9)
    np.testing.assert_allclose(tl.cp_to_tensor(cp), tl.cp_to_tensor(ref), rtol=0,
                               atol=1e-8 * np.abs(x).max())
    # Without the QR the errors differ while it is taken (TensorLy's errors may rise there).
    plain = parafac.__wrapped__(x, 3, **dict(kw, orthogonalise=False))[1]
    assert (qr_sweeps == 0) == np.allclose(plain[:max(qr_sweeps, 2)],
                                           ref_errors[:max(qr_sweeps, 2)], rtol=1e-9)


@pytest.mark.parametrize("sparsity,linesearch", [(0.9, False), (0.05, True), (20, False)])
def test_sparsity_matches_tensorly_from_the_same_start(fresh_patch, sparsity, linesearch):
    """TensorLy's robust CP: sweeps on the tensor itself, the error (stopping rule, line
    search, errors, callback) without the residual's largest entries, and the sparse
    component of the final residual returned beside the model."""
    from tensorly.decomposition import parafac

    rng = np.random.default_rng(4)
    x = np.einsum("ir,jr,kr->ijk", *(rng.standard_normal((s, 4)) for s in (9, 8, 7)))
    x = x + 0.1 * rng.standard_normal(x.shape)
    x.flat[::37] += 5  # outliers
    seen = {"out": [], "ref": []}
    runs = {}
    for key, fn in (("out", parafac), ("ref", parafac.__wrapped__)):
        runs[key] = fn(x, 3, init="random", random_state=5, tol=1e-10, n_iter_max=60,
                       sparsity=sparsity, linesearch=linesearch, return_errors=True,
                       callback=lambda cp, e, key=key: seen[key].append((cp[1], e)))
    assert tt.calls()["native"] == 1
    ((cp, sparse), errors), ((ref, ref_sparse), ref_errors) = runs["out"], runs["ref"]
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-9)
    np.testing.assert_allclose(tl.cp_to_tensor(cp), tl.cp_to_tensor(ref), rtol=0,
                               atol=1e-9 * np.abs(x).max())
    np.testing.assert_allclose(sparse, ref_sparse, rtol=0, atol=1e-9 * np.abs(x).max())
    assert np.count_nonzero(ref_sparse) == _tensorly_args.sparse_entries(sparsity, x.shape)
    assert len(seen["out"]) == len(seen["ref"])
    for (s, e), (t, f) in zip(seen["out"], seen["ref"]):
        assert abs(e - f) <= 1e-9 * f
        np.testing.assert_allclose(s, t, rtol=0, atol=1e-9 * np.abs(x).max())
    # Without sparsity the errors are those of the plain residual.
    plain = parafac.__wrapped__(x, 3, init="random", random_state=5, tol=1e-10, n_iter_max=60,
                                linesearch=linesearch, return_errors=True)[1]
    assert plain[-1] > 1.5 * ref_errors[-1]


def test_sparsity_direct_api():
    rng = np.random.default_rng(1)
    x = rng.random((6, 5, 4))
    (r, sparse), errors = tenfold.parafac(x, 2, sparsity=0.25, return_errors=True, tol=0,
                                          n_iter_max=5)
    assert np.count_nonzero(sparse) == 30
    residual = x - tl.cp_to_tensor(r)
    np.testing.assert_allclose(errors[-1], np.linalg.norm(residual - sparse) / np.linalg.norm(x),
                               rtol=1e-10)
    assert tenfold.parafac(x, 2, sparsity=0.001, n_iter_max=2).fit > 0  # no entry: plain CP
    with pytest.raises(ValueError, match="sparsity applies to dense tensors without a mask"):
        tenfold.parafac(x, 2, sparsity=3, mask=x > 0.1)
    with pytest.raises(ValueError, match="sparsity and orthogonalise apply to dense arrays"):
        tenfold.parafac((np.array([[0, 1], [1, 2], [0, 3]]), np.array([1.0, 2.0]), (2, 3, 4)), 2,
                        sparsity=1)


@pytest.mark.parametrize("kwargs,reason", [
    (dict(orthogonalise=True, init=(None, [np.ones((5, 2)), np.eye(4, 2), np.eye(3, 2)]),
          fixed_modes=[1]), "orthogonalise with fixed_modes"),
    (dict(sparsity=0.9, n_iter_max=0), "sparsity with TensorLy's start"),
    (dict(l2_reg=0.1), "l2_reg"),
])
def test_unserved_arguments_run_tensorly(fresh_patch, kwargs, reason):
    from tensorly.decomposition import parafac

    x = np.random.default_rng(0).random((5, 4, 3))
    out = parafac(x, 2, random_state=0, **kwargs)
    ref = parafac.__wrapped__(x, 2, random_state=0, **kwargs)
    c = tt.calls()
    assert c["native"] == 0 and c["fallback"] == 1
    assert any(r.startswith("parafac: " + reason) for r in c["reasons"])
    a = out[0] if kwargs.get("sparsity") else out
    b = ref[0] if kwargs.get("sparsity") else ref
    np.testing.assert_allclose(tl.cp_to_tensor(a), tl.cp_to_tensor(b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kwargs", [
    dict(n_iter_max=0),
    dict(n_iter_max=0, init="random", return_errors=True),
    dict(n_iter_max=0, mask=(np.arange(60).reshape(5, 4, 3) % 7 != 0).astype(float),
         svd_mask_repeats=3),
    dict(n_iter_max=0, init="random", callback=True),
    dict(fixed_modes=[0, 1, 2], init="random", return_errors=True, callback=True),
])
def test_start_returned_natively(fresh_patch, kwargs):
    """n_iter_max=0 and every mode fixed: TensorLy's start, its callback and error list."""
    from tensorly.decomposition import parafac

    x = np.random.default_rng(0).random((5, 4, 3))
    seen = {"out": [], "ref": []}
    runs = {}
    for key, fn in (("out", parafac), ("ref", parafac.__wrapped__)):
        kw = dict(kwargs)
        if kw.get("callback"):
            kw["callback"] = lambda cp, e, key=key: seen[key].append((cp, e))
        runs[key] = fn(x, 2, random_state=0, **kw)
    c = tt.calls()
    assert c["native"] == 1 and c["fallback"] == 0
    out, ref = runs["out"], runs["ref"]
    assert type(out) is type(ref)
    if isinstance(ref, tuple) and not hasattr(ref, "factors"):
        assert out[1] == ref[1] == []
        out, ref = out[0], ref[0]
    np.testing.assert_array_equal(out.weights, ref.weights)
    for a, b in zip(out.factors, ref.factors):
        np.testing.assert_array_equal(a, b)
    assert len(seen["out"]) == len(seen["ref"])
    for (_, e), (_, f) in zip(seen["out"], seen["ref"]):
        assert abs(e - f) <= 1e-14


@pytest.mark.parametrize("normalize_factors,orthogonalise", [(False, False), (True, False),
                                                              (False, True)])
def test_linesearch_matches_tensorly_from_the_same_start(fresh_patch, normalize_factors,
                                                         orthogonalise):
    """TensorLy's jumps (after its 7th sweep: kept when they beat the previous sweep's
    error, its unnormalised factors extrapolated) natively, with its error list (none for
    a line-search iteration)."""
    from tensorly.decomposition import parafac

    rng = np.random.default_rng(7)
    factors = [rng.standard_normal((s, 4)) for s in (12, 10, 9)]
    factors = [f + 2 * f[:, :1] for f in factors]  # collinear components: many jumps taken
    x = np.einsum("ir,jr,kr->ijk", *factors) + 0.01 * rng.standard_normal((12, 10, 9))
    kw = dict(init="random", random_state=3, n_iter_max=40, tol=1e-12, linesearch=True,
              normalize_factors=normalize_factors, orthogonalise=orthogonalise,
              return_errors=True)
    out, errors = parafac(x, 4, **kw)
    assert tt.calls()["native"] == 1
    ref, ref_errors = parafac.__wrapped__(x, 4, **kw)
    assert len(errors) == len(ref_errors) < 40
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-9)
    np.testing.assert_allclose(tl.cp_to_tensor(out), tl.cp_to_tensor(ref), rtol=0,
                               atol=1e-8 * np.abs(x).max())
    # Tenfold's own rule takes other jumps.
    own = tenfold.parafac(x, 4, init=(None, tl.decomposition._cp.initialize_cp(
        x, 4, init="random", random_state=3)[1]), n_iter_max=40, tol=0, linesearch=True,
        orthogonalise=orthogonalise, return_errors=True)[1]
    assert not np.allclose(own[:len(ref_errors)], ref_errors, rtol=1e-6)


@pytest.mark.parametrize("tensor,reason", [
    (np.arange(24).reshape(4, 3, 2), "dtype int64"),
])
def test_unserved_tensors_run_tensorly(fresh_patch, tensor, reason):
    from tensorly.decomposition import parafac, tucker

    parafac(tensor, 2, n_iter_max=3)
    tucker(tensor.astype(tensor.dtype), [2, 2, 2], n_iter_max=3)
    c = tt.calls()
    assert c["fallback"] == 2 and c["native"] == 0
    assert f"parafac: {reason}" in c["reasons"] and f"tucker: {reason}" in c["reasons"]


EPS = np.finfo(np.float64).eps


@pytest.mark.parametrize("rank", [3, 2.0, np.float64(2.0)], ids=["int", "float", "numpy-float"])
@pytest.mark.parametrize("via_class", [False, True], ids=["tucker", "Tucker"])
def test_tucker_int_and_float_ranks_are_tensorlys(fresh_patch, rank, via_class):
    """An int is the rank of every axis; a float the fraction of the parameters kept
    (validate_tucker_rank: 2.0 of a 3x3x3 tensor is (3, 3, 3)). Untruncated, the call is
    served, and the reconstruction is the tensor's to rounding."""
    from tensorly.decomposition import Tucker, tucker

    x = np.random.default_rng(5).random((3, 3, 3))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if via_class:
            out, errors = Tucker(rank=rank).fit_transform(x), None
        else:
            out, errors = tucker(x, rank, return_errors=True)
    assert tt.calls()["native"] == 1
    # TensorLy's warning for an int, once; none for a float.
    assert sum("Using this rank for all modes" in str(w.message) for w in seen) == (rank == 3)
    ref, ref_errors = tucker.__wrapped__(x, rank, return_errors=True)
    assert out.rank == ref.rank == (3, 3, 3)
    # Both are the tensor to rounding: three orthogonal 3x3 mode products, each entry within
    # about 3 * 3 eps |x| of the tensor's.
    np.testing.assert_allclose(tl.tucker_to_tensor(out), tl.tucker_to_tensor(ref), rtol=0,
                               atol=16 * EPS * np.linalg.norm(x))
    if errors is not None:
        # sqrt(|x|^2 - |core|^2) / |x|: the root of a difference at rounding level.
        assert max(errors + ref_errors) < 16 * np.sqrt(EPS)


@pytest.mark.parametrize("rank", [2, 0.5, "same"])
def test_tucker_truncating_int_and_float_ranks_run_tensorly(fresh_patch, rank):
    from tensorly.decomposition import Tucker, tucker

    x = np.random.default_rng(6).random((6, 5, 4))
    out = tucker(x, rank)
    by_class = Tucker(rank=rank).fit_transform(x)
    ref = tucker.__wrapped__(x, rank)
    c = tt.calls()
    assert c["native"] == 0 and c["fallback"] == 2
    assert c["reasons"] == {"tucker: HOOI start (Tenfold: ST-HOSVD, TensorLy: HOSVD)": 2}
    for got in (out, by_class):
        assert got.rank == ref.rank
        np.testing.assert_array_equal(tl.tucker_to_tensor(got), tl.tucker_to_tensor(ref))


def test_tucker_rank_tensorly_refuses_falls_back(fresh_patch):
    from tensorly.decomposition import tucker

    x = np.random.default_rng(7).random((3, 3, 3))
    with pytest.raises(TypeError, match="not iterable"):  # TensorLy's own error
        tucker(x, np.int64(3))
    assert tt.calls()["reasons"] == {f"tucker: rank {np.int64(3)!r}": 1}


def test_fixed_modes_kept_bit_for_bit_direct_api():
    rng = np.random.default_rng(1)
    x = rng.random((6, 5, 4))
    start = [rng.random((s, 2)) for s in x.shape]
    for order in ("C", "F"):
        r = tenfold.parafac(np.asarray(x, order=order), 2, init=(None, start), fixed_modes=[0, 1],
                            n_iter_max=5, normalize_factors=False)
        np.testing.assert_array_equal(r.factors[0], start[0])
        np.testing.assert_array_equal(r.factors[1], start[1])
        assert not np.array_equal(r.factors[2], start[2])


def test_refused_arguments_direct_api():
    x = np.random.default_rng(1).random((6, 5, 4))
    with pytest.raises(ValueError, match="orthogonalise cannot be combined with fixed modes"):
        tenfold.parafac(x, 2, orthogonalise=True, init=(None, [np.ones((s, 2)) for s in x.shape]),
                        fixed_modes=[0])
    with pytest.raises(ValueError, match="nn_modes: 3 is not an axis"):
        tenfold.non_negative_parafac_hals(x, 2, nn_modes={0, 3})


@pytest.mark.parametrize("nn_modes", [{0, 2}, None, "all"])
def test_nn_modes_matches_tensorly_from_the_same_start(fresh_patch, nn_modes):
    """TensorLy's nn_modes: HALS on those axes, the plain least-squares update on the others
    (TensorLy's own test problem: axis 1 signed)."""
    from tensorly.decomposition import non_negative_parafac_hals

    rng = tl.check_random_state(1234)
    weights = rng.uniform(size=3)
    a, b, c = rng.uniform(size=(8, 3)), rng.standard_normal((9, 3)), rng.uniform(0.1, 1.1, (10, 3))
    x = tl.cp_to_tensor((weights, (a, b, c)))
    kw = dict(rank=3, n_iter_max=100, tol=1e-12, init="svd", nn_modes=nn_modes,
              return_errors=True)
    out, errors = non_negative_parafac_hals(x, **kw)
    assert tt.calls()["native"] == 1
    ref, ref_errors = non_negative_parafac_hals.__wrapped__(x, **kw)
    for axis in _tensorly_args.nonnegative_axes(nn_modes, 3):
        assert out.factors[axis].min() >= 0
    err = np.linalg.norm(x - tl.cp_to_tensor(out)) / np.linalg.norm(x)
    ref_err = np.linalg.norm(x - tl.cp_to_tensor(ref)) / np.linalg.norm(x)
    if nn_modes == "all":  # the signed axis cannot be fitted
        assert err > 0.1 and ref_err > 0.1
    else:
        assert out.factors[1].min() < -0.05
        assert err < 1e-3 and ref_err < 1e-3
    # TensorLy's iterates (the closed-form error resolves about sqrt(eps) of the norm)
    np.testing.assert_allclose(errors, ref_errors, rtol=1e-6, atol=1e-7)


def test_no_sweep_returns_the_start_direct_api():
    """n_iter_max=0: the start itself (TensorLy returns its start too), its fit, no errors."""
    rng = np.random.default_rng(3)
    x = rng.random((6, 5, 4))
    start = [rng.random((s, 2)) for s in x.shape]
    r, errors = tenfold.parafac(x, 2, init=(None, start), n_iter_max=0, return_errors=True)
    assert errors == [] and r.iterations == 0
    np.testing.assert_allclose(tl.cp_to_tensor(r), tl.cp_to_tensor((None, start)), rtol=1e-12)
    assert abs(r.fit - (1 - np.linalg.norm(x - tl.cp_to_tensor((None, start))) /
                        np.linalg.norm(x))) < 1e-10
    (r, sparse) = tenfold.parafac(x, 2, init=(None, start), n_iter_max=0, sparsity=3)
    assert np.count_nonzero(sparse) == 3


def test_tensorly_callback_and_errors_direct_api():
    x = np.random.default_rng(2).random((6, 5, 4))
    seen = []
    r, errors = tenfold.parafac(x, 2, callback=lambda cp, e: seen.append((cp, e)),
                                return_errors=True, random_state=np.random.RandomState(0),
                                init="random", n_iter_max=10, tol=0)
    assert len(seen) == len(errors) == 10
    cp, e = seen[-1]
    assert abs(np.linalg.norm(tl.cp_to_tensor(cp) - x) / np.linalg.norm(x) - e) < 1e-10
    assert abs(errors[-1] - r.relative_error) < 1e-12


@pytest.mark.parametrize("fixed_modes", [None, [0]])
def test_start_weights_reach_no_normal_matrix(fixed_modes):
    """A start whose weights span 1e-17..1 (TensorLy's SVD start above the tensor's rank)
    gives the run of unit weights: ALS never reads the first factor it updates, where the
    weights are folded (folded elsewhere, the first normal matrix has condition ~1e34)."""
    rng = np.random.default_rng(4)
    x = rng.random((6, 5, 4))
    start = [rng.random((s, 3)) for s in x.shape]
    runs = [tenfold.parafac(x, 3, init=(np.array(w), start), fixed_modes=fixed_modes,
                            n_iter_max=8, tol=0, normalize_factors=False)
            for w in ([1.0, 1.0, 1e-17], [1.0, 1.0, 1.0])]
    assert runs[0].eigen_fallbacks == 0
    np.testing.assert_allclose(runs[0].fit_history, runs[1].fit_history, rtol=1e-10)
    np.testing.assert_allclose(tl.cp_to_tensor(runs[0]), tl.cp_to_tensor(runs[1]), rtol=0,
                               atol=1e-10 * np.abs(x).max())


@pytest.mark.parametrize("shape,rank,true_rank", [((30, 20, 10), 4, 6), ((6, 8, 7), 9, 3),
                                                  ((6, 8, 7), 4, 3)])
@pytest.mark.parametrize("normalize_factors", [False, True])
@pytest.mark.parametrize("complex_", [False, True])
def test_svd_start_from_grams(shape, rank, true_rank, normalize_factors, complex_):
    """The patch's SVD start (Gram eigenvectors) is TensorLy's initialize_cp to 1e-7, random
    columns past I_n drawn alike; TensorLy's own SVD runs where a kept singular value is
    not separated (rank above the tensor's: 9 > 3 and 4 > 3). Complex: the phases of
    TensorLy's svd_flip (largest entry of each column real and positive)."""
    from tensorly.decomposition._cp import initialize_cp

    rng = np.random.default_rng(5)
    x = tl.cp_to_tensor((None, [rng.standard_normal((s, true_rank))
                                + (1j * rng.standard_normal((s, true_rank)) if complex_ else 0)
                                for s in shape]))
    if rank < true_rank:
        assert tt._gram_svd_factors(x, rank, np.random.RandomState(0)) is not None
    else:
        assert tt._gram_svd_factors(x, rank, np.random.RandomState(0)) is None
    w, f = tt._start(x, rank, "svd", "truncated_svd", 7, normalize_factors)
    rw, rf = initialize_cp(x, rank, init="svd", random_state=7, normalize_factors=normalize_factors)
    np.testing.assert_allclose(w if w is not None else np.ones(rank), rw, rtol=1e-7)
    for a, b in zip(f, rf):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-7 * np.abs(b).max())
