"""Sparse input to parafac, cp_apr, and the sparse file helpers."""

import numpy as np
import pytest

import tenfold


class Coo:
    """Stands in for pydata sparse.COO: .coords (ndim, nnz), .data, .shape."""

    def __init__(self, dense):
        nz = np.nonzero(dense)
        self.coords = np.array(nz)
        self.data = dense[nz]
        self.shape = dense.shape


def counts(seed=0, shape=(12, 10, 8), rank=2):
    rng = np.random.default_rng(seed)
    factors = [rng.gamma(0.5, 1.0, (n, rank)) for n in shape]
    rate = np.einsum("ir,jr,kr->ijk", *factors)
    return rng.poisson(3.0 * rate / rate.mean()).astype(np.float64)


def triple(x):
    nz = np.nonzero(x)
    return np.array(nz), x[nz], x.shape


def test_parafac_of_a_sparse_tuple_follows_the_dense_run():
    x = counts()
    rng = np.random.default_rng(1)
    start = [rng.random((n, 3)) for n in x.shape]
    s = tenfold.parafac(triple(x), 3, init=(None, start), n_iter_max=20, tol=0)
    d = tenfold.parafac(x, 3, init=(None, start), n_iter_max=20, tol=0)
    assert s.nnz == np.count_nonzero(x)
    np.testing.assert_allclose(s.fit_history, d.fit_history, rtol=1e-9)
    for a, b in zip(s.factors, d.factors):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-7)


def test_parafac_accepts_a_coo_like_object_and_float32():
    x = counts(2)
    r = tenfold.parafac(Coo(x.astype(np.float32)), 2, init="random", linesearch=True, n_starts=2)
    assert r.weights.dtype == np.float32
    assert [f.shape for f in r.factors] == [(12, 2), (10, 2), (8, 2)]
    assert len(r.start_fits) == 2


def test_parafac_csf_layouts_fit_alike_and_say_which_ran():
    x = np.random.default_rng(4).poisson(0.5, (12, 10, 8, 6)).astype(float)
    runs = {csf: tenfold.parafac(triple(x), 3, init="random", random_state=5, n_iter_max=10,
                                 tol=0, csf=csf)
            for csf in ("all", "two", "one", "auto")}
    for csf, r in runs.items():
        assert r.csf == ("all" if csf == "auto" else csf)  # a small tensor: all trees fit
        np.testing.assert_allclose(r.fit_history, runs["all"].fit_history, rtol=1e-10)
    with pytest.raises(ValueError, match=r"unknown csf layout 'three' \(expected auto, all, two or one\)"):
        tenfold.parafac(triple(x), 3, csf="three")
    with pytest.raises(ValueError, match="csf='two' applies to sparse tensors only"):
        tenfold.parafac(x, 3, csf="two")


def test_sparse_duplicates_are_summed():
    coords = np.array([[0, 0, 1], [1, 1, 0]])
    r = tenfold.parafac((coords, np.array([1.0, 2.0, 4.0]), (2, 2)), 1, init="random")
    assert r.nnz == 2


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda c, v, s: (c[:2], v, s), r"coords has shape \(2, \d+\), expected \(3, \d+\)"),
        (lambda c, v, s: (c + (np.arange(3) == 1)[:, None] * 20, v, s), r"index \d+ in mode 1 \(NumPy axis 1\), outside \[0, 10\)"),
        (lambda c, v, s: (c.astype(float) + 0.5, v, s), "coords must hold integers"),
        (lambda c, v, s: (c, np.where(v > 0, np.nan, v), s), "non-finite value"),
    ],
)
def test_bad_sparse_input_is_one_clear_line(make, message):
    with pytest.raises(ValueError, match=message):
        tenfold.parafac(make(*triple(counts())), 2)


def test_sparse_refuses_mask_and_cuda():
    with pytest.raises(ValueError, match="mask does not apply"):
        tenfold.parafac(triple(counts()), 2, mask=np.ones((12, 10, 8), bool))
    with pytest.raises(ValueError, match="backend='cpu' only"):
        tenfold.parafac(triple(counts()), 2, backend="cuda")


def test_cp_apr_dense_and_sparse_agree_and_fit_poisson_counts():
    x = counts(3)
    a = tenfold.cp_apr(x, 2, random_state=4)
    b = tenfold.cp_apr(triple(x), 2, random_state=4)
    assert a.converged
    assert a.log_likelihood == b.log_likelihood  # the same nonzeros in the same order
    for f in a.factors:
        assert np.all(f >= 0)
    # The Poisson likelihood of the model it reports.
    rate = np.einsum("r,ir,jr,kr->ijk", a.weights, *a.factors)
    ll = np.sum(x[x > 0] * np.log(rate[x > 0])) - rate.sum()
    assert a.log_likelihood == pytest.approx(ll, rel=1e-9)


def test_cp_apr_refuses_negative_counts():
    x = counts(5)
    x[1, 2, 3] = -1
    with pytest.raises(ValueError, match=r"nonnegative counts; the entry at \(1, 2, 3\) is -1"):
        tenfold.cp_apr(x, 2)


@pytest.mark.parametrize("name", ["x.tns", "x.tns.gz", "x.tfsparse"])
def test_sparse_files_round_trip(tmp_path, name):
    c, v, s = triple(counts(6))
    tenfold.sparse.save(tmp_path / name, (c, v, s))
    c2, v2, s2 = tenfold.sparse.load(tmp_path / name)
    assert s2 == (12, 10, 8) or name != "x.tfsparse"
    order = np.lexsort(c[::-1])
    np.testing.assert_array_equal(c2, c[:, order])
    np.testing.assert_array_equal(v2, v[order])


def test_cp_apr_starts_from_given_factors():
    x = counts(7)
    rng = np.random.default_rng(8)
    start = [rng.random((n, 2)) for n in x.shape]
    a = tenfold.cp_apr(x, 2, n_iter_max=5, init=start, random_state=1)
    b = tenfold.cp_apr(x, 2, n_iter_max=5, init=start, random_state=2)
    c = tenfold.cp_apr(x, 2, n_iter_max=5, random_state=1)
    np.testing.assert_array_equal(a.weights, b.weights)  # the seed is not used
    assert not np.array_equal(a.weights, c.weights)
    with pytest.raises(ValueError, match="nonnegative start"):
        tenfold.cp_apr(x, 2, init=[-f for f in start])


def test_gcp_bernoulli_and_poisson_in_numpy_axis_order():
    rng = np.random.default_rng(9)
    a, b, c = rng.uniform(-1, 1, (15, 2)), rng.uniform(-1, 1, (12, 2)), rng.uniform(-1, 1, (10, 2))
    m = 2 * np.einsum("ir,jr,kr->ijk", a, b, c)
    bits = (rng.random(m.shape) < 1 / (1 + np.exp(-m))).astype(float)
    res = tenfold.gcp(bits, 2, loss="bernoulli", random_state=0)
    assert [f.shape for f in res.factors] == [(15, 2), (12, 2), (10, 2)]
    f = tenfold.gcp(np.asfortranarray(bits), 2, loss="bernoulli", random_state=0)
    assert f.objective == pytest.approx(res.objective, rel=1e-2)  # another start order
    assert res.objective < bits.size * np.log(2)  # better than m = 0 everywhere
    counts = rng.poisson(np.exp(m / 2)).astype(float)
    assert tenfold.gcp(counts, 2, loss="poisson").converged


@pytest.mark.parametrize("loss, value, message", [
    ("poisson", -2.0, r"loss='poisson' needs nonnegative counts; the entry at NumPy index \[1, 2, 3\] is -2"),
    ("bernoulli", 0.5, r"loss='bernoulli' needs binary data \(0 or 1\); the entry at NumPy index \[1, 2, 3\] is 0.5"),
    ("gamma", -1.0, r"loss='gamma' needs nonnegative data; the entry at NumPy index \[1, 2, 3\] is -1"),
    ("rayleigh", -1.0, r"loss='rayleigh' needs nonnegative data; the entry at NumPy index \[1, 2, 3\] is -1"),
])
def test_gcp_refuses_data_the_loss_cannot_model(loss, value, message):
    x = np.zeros((4, 5, 6))
    x[1, 2, 3] = value
    with pytest.raises(ValueError, match=message):
        tenfold.gcp(x, 1, loss=loss)
    with pytest.raises(ValueError, match="unknown loss 'beta'"):
        tenfold.gcp(x, 1, loss="beta")
    # The same on a sparse tensor, by its coordinates.
    coords = np.array([[0, 1], [0, 2], [0, 3]])
    with pytest.raises(ValueError, match=message.split("; the entry")[0] + r"; the entry at coordinates \[1, 2, 3\]"):
        tenfold.gcp((coords, np.array([1.0, value]), (4, 5, 6)), 1, loss=loss)


def test_gcp_mask_leaves_missing_entries_out_and_bounded_losses_stay_nonnegative():
    rng = np.random.default_rng(12)
    a, b, c = (rng.uniform(0.5, 1.5, (n, 2)) for n in (9, 8, 7))
    m = np.einsum("ir,jr,kr->ijk", a, b, c)
    x = rng.gamma(4.0, m / 4.0)
    mask = rng.random(x.shape) > 0.3
    holes = np.where(mask, x, np.nan)
    res = tenfold.gcp(holes, 2, loss="gamma", mask=mask, random_state=0)
    assert all(np.all(f >= 0) for f in res.factors)
    # The objective is over the observed entries: it is what the result gives there.
    model = np.einsum("r,ir,jr,kr->ijk", res.weights, *res.factors)
    mo = model[mask] + 1e-10
    assert res.objective == pytest.approx(np.sum(x[mask] / mo + np.log(mo)), rel=1e-8)
    with pytest.raises(ValueError, match=r"non-finite entry \(NaN\)"):
        tenfold.gcp(holes, 2, loss="gamma")
    with pytest.raises(ValueError, match="mask has shape"):
        tenfold.gcp(holes, 2, loss="gamma", mask=mask[:, :, :3])
    with pytest.raises(ValueError, match="mask does not apply to a sparse tensor"):
        tenfold.gcp(triple(np.nan_to_num(holes)), 2, mask=mask)
    h = tenfold.gcp(x, 2, loss="huber", huber_delta=0.5, random_state=0)
    assert h.objective < tenfold.gcp(x, 2, loss="huber", n_iter_max=1, random_state=0).objective


def test_sparse_gcp_fits_sampled_bits_without_densifying():
    rng = np.random.default_rng(13)
    shape = (40, 30, 20)
    m = -4.0 + 6.0 * np.einsum("i,j,k->ijk", *(np.arange(n) < n // 3 for n in shape))
    bits = (rng.random(shape) < 1 / (1 + np.exp(-m))).astype(float)
    res = tenfold.gcp(triple(bits), 2, loss="bernoulli", n_iter_max=20, epoch_iters=200,
                      rate=1e-2, random_state=1)
    assert res.nnz == np.count_nonzero(bits)
    assert [f.shape for f in res.factors] == [(40, 2), (30, 2), (20, 2)]
    model = np.einsum("r,ir,jr,kr->ijk", res.weights, *res.factors)
    # The fitted log-odds separate the planted block from the rest.
    block = m > 0
    assert model[block].mean() > 0 > model[~block].mean()
    with pytest.raises(ValueError, match="epoch_iters must be at least 1"):
        tenfold.gcp(triple(bits), 2, loss="bernoulli", epoch_iters=0)


def test_a_dense_tensor_written_as_a_tuple_stays_dense():
    x = counts(10)
    as_tuple = tuple(tuple(tuple(row) for row in plane) for plane in x[:3])
    r = tenfold.parafac(as_tuple, 2, init="random")
    assert not hasattr(r, "nnz")
    assert tenfold.sparse.is_sparse(triple(x))


@pytest.mark.parametrize(
    "shape",
    [np.array([12, 10, 8]), np.array([12.0, 10.0, 8.0]), (12.0, 10, 8.0), [np.int32(12), np.float64(10.0), 8]],
    ids=["int-array", "float-array", "whole-floats", "numpy-scalars"],
)
def test_shape_as_a_numpy_array_or_whole_floats_is_sparse(shape):
    c, v, s = triple(counts(11))
    given = (c, v, shape)
    assert tenfold.sparse.is_sparse(given)
    kw = dict(init="random", random_state=0, n_iter_max=5)
    assert np.array_equal(tenfold.parafac(given, 2, **kw).weights, tenfold.parafac((c, v, s), 2, **kw).weights)
    a, b = tenfold.cp_apr(given, 2, n_iter_max=5, random_state=0), tenfold.cp_apr((c, v, s), 2, n_iter_max=5, random_state=0)
    assert a.nnz == b.nnz and np.array_equal(a.weights, b.weights)
    a, b = tenfold.gcp(given, 2, "poisson", n_iter_max=2, random_state=0), tenfold.gcp((c, v, s), 2, "poisson", n_iter_max=2, random_state=0)
    assert np.array_equal(a.weights, b.weights)


@pytest.mark.parametrize(
    "shape, shown",
    [((12, 10.5, 8), r"\(12, 10\.5, 8\) \(axis 1: 10\.5\)"),
     (np.array([12, 10, 8.25]), r"\(12\.0, 10\.0, 8\.25\) \(axis 2: 8\.25\)"),
     ((12, True, 8), r"\(12, True, 8\) \(axis 1: True\)")],
)
def test_a_shape_that_is_not_whole_numbers_is_named(shape, shown):
    c, v, _ = triple(counts())
    with pytest.raises(ValueError, match=f"^shape must hold whole numbers, got {shown}$"):
        tenfold.parafac((c, v, shape), 2)
    with pytest.raises(ValueError, match=r"^shape \(12, 0, 8\) has size 0 along axis 1; sizes must be in \[1, "):
        tenfold.cp_apr((c, v, (12, 0, 8)), 2)


def test_scipy_nd_coo_array_is_sparse():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    x = counts(12)
    a = scipy_sparse.coo_array(x)
    assert isinstance(a.coords, tuple) and tenfold.sparse.is_sparse(a)  # one index array per axis
    kw = dict(init="random", random_state=0, n_iter_max=5)
    r, ref = tenfold.parafac(a, 2, **kw), tenfold.parafac(triple(x), 2, **kw)
    assert r.nnz == np.count_nonzero(x) and np.array_equal(r.weights, ref.weights)
    assert tenfold.cp_apr(a, 2, n_iter_max=5).nnz == np.count_nonzero(x)
    c, v, s = tenfold.sparse.as_coo(a)
    assert c.shape == (3, np.count_nonzero(x)) and s == [12, 10, 8]


def test_load_takes_a_shape(tmp_path):
    path = tmp_path / "x.tns"
    path.write_text("1 1 1 1.5\n2 3 1 2.5\n")  # no "# shape:" line: the largest indices
    c, v, s = tenfold.sparse.load(path)
    assert s == (2, 3, 1)
    c2, v2, s2 = tenfold.sparse.load(path, shape=np.array([4, 5, 6]))
    assert s2 == (4, 5, 6)
    np.testing.assert_array_equal(c2, c)
    np.testing.assert_array_equal(v2, v)
    with pytest.raises(OSError, match="line 2: column 2: index 3 exceeds the size 2 of mode 1"):
        tenfold.sparse.load(path, shape=(4, 2, 6))
    with pytest.raises(ValueError, match="^shape must hold whole numbers"):
        tenfold.sparse.load(path, shape=(4, 5.5, 6))
    binary = tmp_path / "x.tfsparse"
    tenfold.sparse.save(binary, (c2, v2, s2))
    assert tenfold.sparse.load(binary, shape=(4.0, 5, 6))[2] == (4, 5, 6)
    with pytest.raises(OSError, match=r"holds a tensor of shape \(4, 5, 6\), not the shape given \(4, 5, 7\)"):
        tenfold.sparse.load(binary, shape=(4, 5, 7))


def test_uint64_coords_past_int64_are_named_as_given():
    # They used to wrap to a negative index in the message.
    coords = np.array([[2**63 + 5, 1], [0, 1], [0, 1]], dtype=np.uint64)
    with pytest.raises(ValueError, match=r"^entry 0 has index 9223372036854775813 on axis 0, "
                                         r"outside \[0, 3\)$"):
        tenfold.parafac((coords, np.array([1.0, 2.0]), (3, 3, 3)), 1)


def test_a_binary_file_is_refused_in_one_printable_line(tmp_path):
    # It used to raise UnicodeDecodeError: the message quoted the raw bytes.
    path = tmp_path / "x.tns"
    path.write_bytes(b"1 2 3 4\n1 \xff\x00\x9c 1 2\n")
    with pytest.raises(OSError, match=r"line 2: column 2: '\\xff\\x00\\x9c' is not an index"):
        tenfold.sparse.load(path)
