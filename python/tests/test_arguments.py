"""Bad arguments give one clear error in the caller's terms: the Python keyword, NumPy axes,
shapes and indices as written (not the library's option names or its mode order), with
no value truncated, parsed or dropped on the way (python/tenfold/_validate.py)."""

import re
import warnings

import numpy as np
import pytest

import tenfold
from tenfold import attention

SHAPE = (6, 5, 4)


@pytest.fixture
def x():
    return np.random.default_rng(0).random(SHAPE)


@pytest.fixture
def weights():
    rng = np.random.default_rng(1)
    return rng.standard_normal((16, 8)), rng.standard_normal((16, 8))


def compress(wq, wk, **kwargs):
    return attention.compress(wq, wk, **{"heads": 2, "shared_dim": 4, **kwargs})


# --- non-real dtypes are refused also when dtype= is given ---


@pytest.mark.parametrize(
    "bad",
    [
        lambda x: x + 1j,
        lambda x: x.astype(object),
        lambda x: x.astype(str),
        lambda x: np.zeros(x.shape, dtype="datetime64[s]"),
        lambda x: np.zeros(x.shape, dtype="timedelta64[s]"),
    ],
    ids=["complex", "object", "str", "datetime", "timedelta"],
)
@pytest.mark.parametrize("dtype", [None, np.float64, np.float32])
def test_non_real_tensors_are_refused_with_or_without_dtype(x, bad, dtype):
    y = bad(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning on the way to the TypeError
        message = "^" + re.escape(f"tensor has dtype {y.dtype}; ")
        if y.dtype.kind != "c" or dtype is not None:  # parafac computes complex tensors
            with pytest.raises(TypeError, match=message):
                tenfold.parafac(y, 2, dtype=dtype)
        with pytest.raises(TypeError, match=message):
            tenfold.tucker(y, rank=2, dtype=dtype)


def test_complex_start_and_weights_are_refused(x):
    factors = [np.ones((n, 2)) for n in SHAPE]
    bad = [factors[0], factors[1] + 1j, factors[2]]
    with pytest.raises(TypeError, match="^init factor 1 has dtype complex128"):
        tenfold.parafac(x, 2, init=(None, bad), dtype=np.float64)
    with pytest.raises(TypeError, match="^init weights has dtype complex128"):
        tenfold.parafac(x, 2, init=(np.ones(2) + 1j, factors))


def test_complex_attention_weights_are_refused(weights):
    wq, wk = weights
    with pytest.raises(TypeError, match="^query_weight has dtype complex128"):
        compress(wq + 1j, wk, dtype=np.float64)
    with pytest.raises(TypeError, match="^key_weight has dtype complex128"):
        compress(wq, wk + 1j, dtype=np.float32)
    with pytest.raises(TypeError, match="^input_moment has dtype complex128"):
        compress(wq, wk, input_moment=np.eye(8) + 0j)


def test_masked_arrays_are_refused_pointing_to_mask(x):
    m = np.ma.masked_array(x, mask=x > 0.5)
    with pytest.raises(TypeError, match=r"masked array.*mask=~numpy\.ma\.getmaskarray\(tensor\)"):
        tenfold.parafac(m, 2)
    with pytest.raises(TypeError, match="^tensor is a numpy.ma masked array"):
        tenfold.tucker(m, rank=2)
    # What the message says to do runs, and fits the observed entries.
    r = tenfold.parafac(np.ma.getdata(m), 2, mask=~np.ma.getmaskarray(m))
    assert 0.0 < r.fit <= 1.0


# --- big-endian arrays are byte-swapped into a copy ---


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_big_endian_input_is_byte_swapped_without_touching_it(x, dtype):
    native = x.astype(dtype)
    big = native.astype(native.dtype.newbyteorder(">"))
    before = big.copy()
    r, ref = tenfold.parafac(big, 2), tenfold.parafac(native, 2)
    assert r.weights.dtype == dtype
    # The copy holds the same values in the same order: the same arithmetic, the same bits.
    assert np.array_equal(r.weights, ref.weights)
    assert all(np.array_equal(a, b) for a, b in zip(r.factors, ref.factors))
    asked = tenfold.parafac(native, 2, dtype=big.dtype)  # dtype= in either byte order
    assert asked.weights.dtype == dtype and np.array_equal(asked.weights, ref.weights)
    t, tref = tenfold.tucker(big, rank=2), tenfold.tucker(native, rank=2)
    assert np.array_equal(t.core, tref.core)
    assert big.dtype.byteorder == ">" and np.array_equal(big, before)


def test_big_endian_attention_weights_keep_float32(weights):
    wq, wk = (w.astype(">f4") for w in weights)
    r = compress(wq, wk)
    ref = compress(wq.astype(np.float32), wk.astype(np.float32))
    assert r["collab.query.weight"].dtype == np.float32
    assert np.array_equal(r["collab.query.weight"], ref["collab.query.weight"])


# --- integers: no truncation, parsing or bools; out-of-range values named ---


@pytest.mark.parametrize("rank", [2.7, 2.0, "2", True, None])
def test_rank_must_be_an_int(x, rank):
    with pytest.raises(TypeError, match="^rank must be an int"):
        tenfold.parafac(x, rank)


@pytest.mark.parametrize("rank", [np.int64(2), np.uint8(2), np.int32(2)])
def test_numpy_integer_ranks_are_accepted(x, rank):
    assert tenfold.parafac(x, rank).rank == 2
    assert tenfold.tucker(x, rank=[rank, 2, 2]).rank == (2, 2, 2)
    assert tenfold.tucker(x, rank=rank).rank == (2, 2, 2)


@pytest.mark.parametrize("rank", [[2.5, 2, 2], [2, "2", 2], [2, 2, True], 2.0, "222"])
def test_tucker_ranks_must_be_ints(x, rank):
    with pytest.raises(TypeError, match=r"^rank(\[\d\])? must be an int"):
        tenfold.tucker(x, rank=rank)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda x, w: tenfold.parafac(x, 2**63), r"^rank 9223372036854775808 exceeds 20, the largest CP rank of any tensor of shape \(6, 5, 4\)"),
        (lambda x, w: tenfold.parafac(x, 2, n_iter_max=2**40), "^n_iter_max must be at most 2147483647, got 1099511627776"),
        (lambda x, w: tenfold.parafac(x, 2, random_state=2**64), "^random_state must be at most 18446744073709551615"),
        (lambda x, w: tenfold.parafac(x, 2, n_starts=2**31), "^n_starts must be at most"),
        (lambda x, w: tenfold.tucker(x, rank=[2**63, 2, 2]), r"^rank\[0\] = 9223372036854775808 exceeds 6, the length of axis 0"),
        (lambda x, w: tenfold.tucker(x, rank=2, method="hooi", n_iter_max=2**40), "^n_iter_max must be at most"),
        (lambda x, w: compress(*w, random_state=-1), "^random_state must be at least 0, got -1"),
        (lambda x, w: compress(*w, random_state=2**64), "^random_state must be at most"),
        (lambda x, w: compress(*w, shared_dim=2**63), "^shared_dim must be at most"),
        (lambda x, w: compress(*w, heads=-2**63 - 1), "^heads must be at least 1"),
        (lambda x, w: compress(*w, n_iter_max=2**31), "^n_iter_max must be at most"),
    ],
)
def test_out_of_range_integers_name_the_argument(x, weights, call, message):
    with pytest.raises(ValueError, match=message):
        call(x, weights)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(shared_dim=2.5), TypeError, "^shared_dim must be an int"),
        (dict(shared_dim="4"), TypeError, "^shared_dim must be an int"),
        (dict(heads=2.0), TypeError, "^heads must be an int"),
        (dict(heads=True), TypeError, "^heads must be an int"),
        (dict(random_state=1.5), TypeError, "^random_state must be an int"),
        (dict(tol="1e-6"), TypeError, "^tol must be a number"),
    ],
)
def test_attention_scalars_are_not_truncated(weights, kwargs, error, message):
    with pytest.raises(error, match=message):
        compress(*weights, **kwargs)


def test_compress_file_and_analyze_file_check_their_integers(tmp_path):
    with pytest.raises(TypeError, match="^shared_dim must be an int"):
        attention.compress_file(tmp_path / "in.safetensors", tmp_path / "out.safetensors",
                                shared_dim=2.5)
    with pytest.raises(ValueError, match="^random_state must be at least 0"):
        attention.compress_file(tmp_path / "in.safetensors", tmp_path / "out.safetensors",
                                shared_dim=2, random_state=-1)
    with pytest.raises(TypeError, match="^heads must be an int"):
        attention.analyze_file(tmp_path / "in.safetensors", heads="12")


def sparse_triple(x):
    nz = np.nonzero(x)
    return np.array(nz), x[nz], x.shape


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: tenfold.parafac(sparse_triple(x), 2.7), TypeError, r"^rank must be an int, got 2\.7 \(float\)$"),
        (lambda x: tenfold.parafac(sparse_triple(x), 2, n_iter_max="5"), TypeError, "^n_iter_max must be an int"),
        (lambda x: tenfold.parafac(sparse_triple(x), 2, tol="1e-6"), TypeError, "^tol must be a number"),
        (lambda x: tenfold.parafac(sparse_triple(x), 21), ValueError, r"^rank 21 exceeds 20, the largest CP rank"),
        (lambda x: tenfold.cp_apr(x, "2"), TypeError, r"^rank must be an int, got '2' \(str\)$"),
        (lambda x: tenfold.cp_apr(x, 2, n_inner_iter_max=2.5), TypeError, "^n_inner_iter_max must be an int"),
        (lambda x: tenfold.cp_apr(x, 2, n_iter_max=0), ValueError, "^n_iter_max must be at least 1, got 0$"),
        (lambda x: tenfold.cp_apr(x, 2, kappa="0.01"), TypeError, "^kappa must be a number"),
        (lambda x: tenfold.gcp(x, 2.5), TypeError, "^rank must be an int"),
        (lambda x: tenfold.gcp(x, 2, memory=True), TypeError, "^memory must be an int, got the bool True$"),
        (lambda x: tenfold.gcp(x, 2, n_iter_max=0), ValueError, "^n_iter_max must be at least 1, got 0$"),
        (lambda x: tenfold.gcp(x, 2, huber_delta="0.5"), TypeError, "^huber_delta must be a number"),
        (lambda x: tenfold.gcp(sparse_triple(x), 2, epoch_iters=1.5), TypeError, "^epoch_iters must be an int"),
        (lambda x: tenfold.gcp(sparse_triple(x), 2, rate="1e-3"), TypeError, "^rate must be a number"),
    ],
)
def test_sparse_cp_apr_and_gcp_scalars_are_not_truncated(x, call, error, message):
    with pytest.raises(error, match=message):
        call(x)


def test_sparse_cp_apr_and_gcp_take_numpy_integers(x):
    t = sparse_triple(x)
    assert tenfold.parafac(t, np.int64(2), n_iter_max=np.int32(3)).rank == 2
    assert len(tenfold.cp_apr(t, np.uint8(2), n_iter_max=np.int64(3)).weights) == 2
    assert len(tenfold.gcp(x, np.int64(2), n_iter_max=np.int64(3), memory=np.int16(4)).weights) == 2


# --- options by their Python keywords ---


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda x, w: tenfold.parafac(x, 2, n_iter_max=-1), "^n_iter_max must be at least 0, got -1$"),
        (lambda x, w: tenfold.parafac(x, 2, l2_reg=-1), "^l2_reg must be finite and >= 0, got -1.0$"),
        (lambda x, w: tenfold.parafac(x, 2, tol=float("nan")), "^tol must be finite and >= 0"),
        (lambda x, w: tenfold.non_negative_parafac_hals(x, 2, n_iter_max=-1), "^n_iter_max must be"),
        (lambda x, w: tenfold.parafac(x, 2, n_starts=-1), "^n_starts must be at least 0"),
        (lambda x, w: tenfold.tucker(x, tol=2), r"^tol must be in \(0, 1\), got 2.0$"),
        (lambda x, w: tenfold.tucker(x, rank=2, method="hooi", n_iter_max=0), "^n_iter_max must be at least 1"),
        (lambda x, w: tenfold.tucker(x, rank=2, method="hooi", hooi_tol=-1), "^hooi_tol must be finite and >= 0"),
        (lambda x, w: compress(*w, n_iter_max=0), "^n_iter_max must be at least 1"),
        (lambda x, w: compress(*w, tol=-1), "^tol must be finite and >= 0"),
        (lambda x, w: compress(*w, damping=-1, input_moment=np.eye(8)), "^damping must be finite and >= 0"),
    ],
)
def test_options_are_named_by_their_python_keyword(x, weights, call, message):
    with pytest.raises(ValueError, match=message):
        call(x, weights)


# --- NumPy axes, shapes and indices as the caller wrote them (C and Fortran order) ---


@pytest.fixture(params=["C", "F"])
def order(request):
    return request.param


def test_tucker_rank_errors_name_numpy_axes(x, order):
    y = np.asarray(x, order=order)
    with pytest.raises(ValueError, match=r"^rank\[0\] = 7 exceeds 6, the length of axis 0 of shape \(6, 5, 4\)$"):
        tenfold.tucker(y, rank=[7, 2, 2])
    with pytest.raises(ValueError, match=r"^rank = 5 exceeds 4, the length of axis 2 of shape \(6, 5, 4\)$"):
        tenfold.tucker(y, rank=5)
    with pytest.raises(ValueError, match=r"^rank has 2 entries, but the tensor of shape \(6, 5, 4\) has 3 axes$"):
        tenfold.tucker(y, rank=[2, 2])
    with pytest.raises(ValueError, match=r"^rank\[0\] = 5 exceeds 4, the product of the lengths of the axes other than 0 of shape \(6, 2, 2\)"):
        tenfold.tucker(np.ones((6, 2, 2), order=order), rank=[5, 1, 1])


def test_mode_order_errors_name_numpy_axes(x, order):
    y = np.asarray(x, order=order)
    with pytest.raises(ValueError, match=r"^mode_order must be a permutation of the axes 0..2, got \[0, 1, 5\]$"):
        tenfold.tucker(y, rank=2, mode_order=[0, 1, 5])
    with pytest.raises(ValueError, match=r"got \[0, 0, 1\]$"):
        tenfold.tucker(y, rank=2, mode_order=[0, 0, 1])
    assert tenfold.tucker(y, rank=2, mode_order=[2, 0, 1]).mode_order == [2, 0, 1]


def test_cp_shape_errors_name_numpy_axes(x, order):
    y = np.asarray(x, order=order)
    with pytest.raises(ValueError, match=r"^rank 21 exceeds 20, the largest CP rank of any tensor of shape \(6, 5, 4\)"):
        tenfold.parafac(y, 21)
    factors = [np.ones((6, 2)), np.ones((5, 2)), np.ones((3, 2))]
    with pytest.raises(ValueError, match=r"^init factor 2 has shape \(3, 2\), expected \(4, 2\)"):
        tenfold.parafac(y, 2, init=(None, factors))
    factors = [np.ones((6, 2)), np.ones((5, 3)), np.ones((4, 2))]
    with pytest.raises(ValueError, match=r"^init factor 1 has shape \(5, 3\), expected \(5, 2\)"):
        tenfold.parafac(y, 2, init=(None, factors))


def test_nan_in_observed_entry_is_named_by_its_numpy_index(x, order):
    y = np.asarray(x, order=order)
    y[5, 1, 3] = np.nan
    mask = np.ones(SHAPE, dtype=bool)
    with pytest.raises(ValueError, match=r"^tensor has a non-finite observed entry \(NaN\) at NumPy index \[5, 1, 3\]"):
        tenfold.parafac(y, 2, mask=mask)
    mask[5, 1, 3] = False  # missing: the NaN is not read
    assert np.isfinite(tenfold.parafac(y, 2, mask=mask).fit)


def test_attention_errors_name_numpy_indices_and_shapes(weights, order):
    wq, wk = (np.asarray(w, order=order) for w in weights)
    bad = wq.copy(order=order)
    bad[3, 7] = np.nan
    with pytest.raises(ValueError, match=r"^query_weight has a non-finite entry \(NaN\) at NumPy index \[3, 7\]$"):
        compress(bad, wk)
    with pytest.raises(ValueError, match=r"^key_weight has a non-finite entry \(NaN\) at NumPy index \[3, 7\]$"):
        compress(wq, bad)
    with pytest.raises(ValueError, match=r"^key_weight has shape \(16, 6\), expected \(16, 8\)"):
        compress(wq, wk[:, :6])
    with pytest.raises(ValueError, match=r"^key_weight has shape \(12, 8\), expected \(16, 8\)"):
        compress(wq, wk[:12])
    with pytest.raises(ValueError, match=r"^query_bias has shape \(8,\), expected \(16,\)"):
        compress(wq, wk, query_bias=np.zeros(8))
    with pytest.raises(ValueError, match=r"^input_moment has shape \(8, 9\), expected \(8, 8\)"):
        compress(wq, wk, input_moment=np.zeros((8, 9)))


@pytest.mark.parametrize("shape, axis", [((3, 0, 4), 1), ((0, 5), 0), ((2, 3, 0), 2)])
def test_an_axis_of_length_zero_is_named(shape, axis):
    message = "^" + re.escape(f"tensor has length 0 along axis {axis} (shape {shape}); ")
    with pytest.raises(ValueError, match=message):
        tenfold.parafac(np.zeros(shape), 1)
    with pytest.raises(ValueError, match=f"^tensor has length 0 along axis {axis}"):
        tenfold.tucker(np.zeros(shape), rank=1)


# --- set_num_threads ---


@pytest.fixture
def restore_threads():
    yield
    tenfold.set_num_threads(0)


def test_set_num_threads_caps_absurd_counts_with_a_warning(restore_threads):
    from tenfold._validate import THREADS_PER_CPU, usable_cpus

    cap = THREADS_PER_CPU * usable_cpus()
    for n in (10000, 2**31, 2**70):
        with pytest.warns(RuntimeWarning, match=f"using {cap} threads"):
            tenfold.set_num_threads(n)
        assert tenfold.num_threads() == cap
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tenfold.set_num_threads(cap)
        assert tenfold.num_threads() == cap
        tenfold.set_num_threads(1)
        assert tenfold.num_threads() == 1


def test_set_num_threads_refuses_negative_and_non_integer_counts(restore_threads):
    tenfold.set_num_threads(1)
    with pytest.raises(ValueError, match="^threads must be at least 0, got -1$"):
        tenfold.set_num_threads(-1)
    with pytest.raises(TypeError, match="^threads must be an int"):
        tenfold.set_num_threads(2.5)
    with pytest.raises(TypeError, match="^threads must be an int"):
        tenfold.set_num_threads(True)
    assert tenfold.num_threads() == 1
    tenfold.set_num_threads(np.int64(0))  # the default again
    assert tenfold.num_threads() >= 1
