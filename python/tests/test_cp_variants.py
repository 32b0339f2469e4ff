"""parafac with a mask, several starts and compression, and non_negative_parafac_hals:
the same bits as the program's flags, and their errors."""

import json
import subprocess

import numpy as np
import pytest

import tenfold
from conftest import DATA, planted


def run_cli(cli, tmp_path, x, *flags):
    np.save(tmp_path / "x.npy", x)
    subprocess.run([cli, "cp", str(tmp_path / "x.npy"), *flags, "--out", str(tmp_path / "cp")],
                   check=True, capture_output=True)
    return np.load(tmp_path / "cp" / "weights.npy"), [
        np.load(tmp_path / "cp" / f"factor_{a}.npy") for a in range(x.ndim)
    ]


def assert_same_model(r, weights, factors):
    np.testing.assert_array_equal(weights, r.weights)
    for f, g in zip(factors, r.factors):
        np.testing.assert_array_equal(f, g)


@pytest.mark.parametrize("order", ["C", "F"])
def test_mask_equals_the_programs_missing_nan(cli, tmp_path, order):
    x = np.asarray(np.load(DATA / "IL2_Response_Tensor.npy"), order=order)
    observed = ~np.isnan(x)
    assert (~observed).sum() == 192
    r = tenfold.parafac(x, 3, mask=observed, n_iter_max=200, tol=1e-10)
    assert_same_model(r, *run_cli(cli, tmp_path, x, "--rank", "3", "--missing", "nan",
                                  "--max-iters", "200", "--tol", "1e-10"))
    # The fit is over the observed entries; NaN never reaches the model.
    assert 0.7 < r.fit < 1.0
    assert all(np.isfinite(f).all() for f in r.factors)


def test_mask_recovers_hidden_entries():
    x, _ = planted((12, 10, 8), 3, seed=4)
    observed = np.random.default_rng(5).random(x.shape) > 0.3
    hidden = np.where(observed, x, np.nan)
    r = tenfold.parafac(hidden, 3, mask=observed, n_iter_max=2000, tol=1e-14)
    model = np.einsum("r,ir,jr,kr->ijk", r.weights, *r.factors)
    err = np.linalg.norm((model - x)[~observed]) / np.linalg.norm(x[~observed])
    assert err < 1e-5


def test_mask_errors():
    x = np.ones((4, 3, 2))
    with pytest.raises(ValueError, match=r"mask has shape \(4, 3\)"):
        tenfold.parafac(x, 1, mask=np.ones((4, 3), dtype=bool))
    # 0/1 numbers are a mask, as TensorLy takes them; other values are not.
    with pytest.raises(ValueError, match="0 or 1"):
        tenfold.parafac(x, 1, mask=np.full(x.shape, 0.5))
    with pytest.raises(TypeError, match="boolean"):
        tenfold.parafac(x, 1, mask=np.ones(x.shape, dtype=complex))
    r = tenfold.parafac(x, 1, mask=np.ones(x.shape, dtype=float), n_iter_max=3)
    assert r.fit > 0.999
    # Without a mask a NaN is still refused, named by its NumPy index.
    x[0, 1, 1] = np.nan
    with pytest.raises(ValueError, match=r"NumPy index \[0, 1, 1\]"):
        tenfold.parafac(x, 1)


def test_non_negative_hals_equals_the_programs_nonnegative(cli, covid, tmp_path):
    x = np.abs(covid)
    r = tenfold.non_negative_parafac_hals(x, 3, n_iter_max=50)
    assert min(f.min() for f in r.factors) >= 0.0
    assert_same_model(r, *run_cli(cli, tmp_path, x, "--rank", "3", "--nonnegative",
                                  "--max-iters", "50", "--tol", "1e-8"))


def test_starts_and_compression_report_what_ran(covid):
    r = tenfold.parafac(covid, 3, init="random", n_starts=3, n_iter_max=30)
    assert len(r.start_fits) == 3
    assert r.fit == r.start_fits[r.best_start] == max(r.start_fits)
    # (large enough that starts on the core cost less than two fifths of one in all)
    x, _ = planted((120, 100, 80), 4, seed=2, noise=0.01)
    c = tenfold.parafac(x, 4, compress="on", tol=1e-10, n_iter_max=500)
    assert c.compressed and c.compression_ranks == [4, 4, 4]
    assert 0 < c.compressed_iterations <= c.iterations
    # n_starts=0, the default: several starts on the core (start_fits are the core's),
    # n_starts=1 one.
    assert len(c.start_fits) > 1
    one = tenfold.parafac(x, 4, compress="on", tol=1e-10, n_iter_max=500, n_starts=1)
    assert one.compressed and len(one.start_fits) == 1
    plain = tenfold.parafac(x, 4, compress="off", tol=1e-10, n_iter_max=500)
    assert not plain.compressed and plain.compression_ranks == []
    assert abs(c.fit - plain.fit) < 1e-7
    with pytest.raises(ValueError, match="compress"):
        tenfold.parafac(x, 4, compress="sometimes")
    with pytest.raises(ValueError, match="n_starts"):
        tenfold.parafac(x, 4, n_starts=-1)  # 0 is automatic


def test_sampled_solver_equals_the_programs(cli, tmp_path):
    # A planted 30 x 25 x 20 rank-3 tensor with 1 % noise: S = 64 rows of the 500 to 750
    # of each Khatri-Rao product, so the solves are sampled; the same draws as the
    # program's, and within 1e-3 of exact ALS's fit (its error is about 0.01).
    x, _ = planted((30, 25, 20), 3, 4, noise=0.01)
    r = tenfold.parafac(x, 3, n_iter_max=200, random_state=2, solver="sampled", samples=64,
                        fit_check_every=3, compress="off")
    assert_same_model(r, *run_cli(cli, tmp_path, x, "--rank", "3", "--max-iters", "200",
                                  "--seed", "2", "--solver", "sampled", "--samples", "64",
                                  "--fit-check-every", "3", "--compress", "off"))
    exact = tenfold.parafac(x, 3, n_iter_max=200, random_state=2, compress="off")
    assert abs(r.fit - exact.fit) < 1e-3
    # Another seed draws other rows.
    other = tenfold.parafac(x, 3, n_iter_max=200, random_state=3, solver="sampled", samples=64,
                            compress="off")
    assert not np.array_equal(other.factors[0], r.factors[0])


@pytest.mark.parametrize("kwargs, message", [
    (dict(solver="fast"), "solver must be 'exact' or 'sampled', got 'fast'"),
    (dict(solver="sampled", samples=-1), "samples must be at least 0, got -1"),
    (dict(solver="sampled", fit_check_every=-1), "fit_check_every must be at least 0, got -1"),
    (dict(solver="sampled", linesearch=True), "cannot be combined with linesearch=True"),
    (dict(solver="sampled", n_starts=2), "cannot be combined with n_starts=2"),
    (dict(solver="sampled", compress="on"), "cannot be combined with compress='on'"),
    (dict(solver="sampled", mask=np.ones((4, 3, 2), dtype=bool)), "cannot be combined with mask"),
    (dict(solver="sampled", backend="cuda"), "cannot be combined with backend='cuda'"),
])
def test_sampled_solver_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tenfold.parafac(np.ones((4, 3, 2)), 1, **kwargs)
    with pytest.raises(TypeError, match="samples must be an int"):
        tenfold.parafac(np.ones((4, 3, 2)), 1, solver="sampled", samples=2.5)


def test_default_starts_escape_the_automatic_starts_local_optimum(cli, tmp_path):
    # Poisson counts of a gamma rank-4 model (5 % nonzero): the automatic (nvecs) start
    # settles at a worse local optimum (fit 0.0661) than random starts reach (0.0685);
    # the default's random starts, within half the first start's sweeps, find it.
    rng = np.random.default_rng(11)
    factors = [rng.gamma(1.0, 1.0, (d, 4)) for d in (60, 50, 40)]
    rate = np.einsum("ir,jr,kr->ijk", *factors)
    x = rng.poisson(rate * (-np.log(0.95) * rate.size / rate.sum())).astype(float)
    np.save(tmp_path / "x.npy", x)

    def fit(*flags):
        out = tmp_path / ("cp" + "".join(flags))
        subprocess.run([cli, "cp", str(tmp_path / "x.npy"), "--rank", "4", *flags, "-q",
                        "--out", str(out)], check=True, capture_output=True)
        return json.loads((out / "report.json").read_text())

    one, default = fit("--n-starts", "1"), fit()
    assert len(one["start_fits"]) == 1
    assert len(default["start_fits"]) > 1
    assert default["fit"] > one["fit"] + 1e-3
    assert default["best_start"] > 0  # a random start won
