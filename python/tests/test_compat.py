"""Same answers as the tenfold program (bit for bit) and as TensorLy (fit to 1e-8 from
the same start), and TensorLy's own functions on the results."""

import subprocess

import numpy as np
import pytest

import tenfold
from conftest import planted

tl = pytest.importorskip("tensorly", reason="scripts/test.sh installs tensorly")
from tensorly.cp_tensor import CPTensor  # noqa: E402
from tensorly.decomposition import parafac as tl_parafac  # noqa: E402


def test_tensorly_reconstructs_both_results(covid):
    r = tenfold.parafac(covid, 3, n_iter_max=50)
    weights, factors = r
    ours = np.einsum("ir,jr,kr,r->ijk", *factors, weights)
    np.testing.assert_allclose(tl.cp_to_tensor(r), ours, rtol=1e-12, atol=1e-12)
    t = tenfold.tucker(covid, rank=[5, 4, 3])
    dense = tl.tucker_to_tensor(t)
    err = np.linalg.norm(dense - covid) / np.linalg.norm(covid)
    assert err == pytest.approx(t.relative_error, rel=1e-8)


def fit_histories(x, rank, seed, iterations):
    rng = np.random.default_rng(seed)
    start = [rng.random((n, rank)) for n in x.shape]
    ours = tenfold.parafac(x, rank, init=(None, start), n_iter_max=iterations, tol=0)
    # TensorLy computes its error only with a nonzero tol; this one never stops it.
    _, errors = tl_parafac(x, rank, init=CPTensor((np.ones(rank), [f.copy() for f in start])),
                           n_iter_max=iterations, tol=1e-300, return_errors=True)
    return ours.fit_history, 1 - np.asarray(errors)


@pytest.mark.parametrize("rank", [2, 4, 6])
def test_fit_equals_tensorly_from_the_same_start_on_covid(covid, rank):
    ours, theirs = fit_histories(covid, rank, seed=rank, iterations=40)
    assert len(ours) == len(theirs) == 40
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-8)


@pytest.mark.parametrize("shape, rank", [((30, 25, 20), 4), ((12, 10, 8, 6), 3)])
def test_fit_equals_tensorly_from_the_same_start_on_planted_problems(shape, rank):
    x, _ = planted(shape, rank, seed=11, noise=0.05)
    ours, theirs = fit_histories(x, rank, seed=12, iterations=30)
    # TensorLy stops where its error stops changing at all (tol=1e-300); the iterations
    # up to there are compared.
    assert len(theirs) >= 10
    np.testing.assert_allclose(ours[: len(theirs)], theirs, rtol=0, atol=1e-8)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_parafac_equals_the_program_bit_for_bit(cli, covid, tmp_path, order, dtype):
    x = np.asarray(covid, dtype=dtype, order=order)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([cli, "cp", str(tmp_path / "x.npy"), "--rank", "4", "--init", "random",
                    "--seed", "9", "--max-iters", "25", "--out", str(tmp_path / "cp")],
                   check=True, capture_output=True)
    r = tenfold.parafac(np.load(tmp_path / "x.npy"), 4, init="random", random_state=9,
                        n_iter_max=25)
    np.testing.assert_array_equal(np.load(tmp_path / "cp" / "weights.npy"), r.weights)
    for a, f in enumerate(r.factors):
        np.testing.assert_array_equal(np.load(tmp_path / "cp" / f"factor_{a}.npy"), f)


@pytest.mark.parametrize("order", ["C", "F"])
def test_tucker_equals_the_program_bit_for_bit(cli, covid, tmp_path, order):
    np.save(tmp_path / "x.npy", np.asarray(covid, order=order))
    subprocess.run([cli, "tucker", str(tmp_path / "x.npy"), "--ranks", "6,4,3", "--method",
                    "hooi", "--out", str(tmp_path / "tk")], check=True, capture_output=True)
    r = tenfold.tucker(np.load(tmp_path / "x.npy"), rank=[6, 4, 3], method="hooi")
    np.testing.assert_array_equal(np.load(tmp_path / "tk" / "core.npy"), r.core)
    for a, f in enumerate(r.factors):
        np.testing.assert_array_equal(np.load(tmp_path / "tk" / f"factor_{a}.npy"), f)
