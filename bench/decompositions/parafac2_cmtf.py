"""PARAFAC2 and CMTF: tenfold against TensorLy 0.10 (NumPy backend), same data and start.

Usage (a virtual environment with tenfold installed by `pip install .` and tensorly):
    python bench/decompositions/parafac2_cmtf.py [--quick]

PARAFAC2 (issue 46): 50 slices of 100-300 x 40 (a planted rank-5 model, 1 % noise), rank 5,
TensorLy's defaults (5 inner sweeps, line search) from TensorLy's random start, a fixed number
of iterations (tol=1e-100: both compute their error list every iteration, neither stops).
CMTF: a 200 x 100 x 50 tensor and a 200 x 300 matrix (a planted rank-8 coupled model, 1 %
noise), rank 8, from the same random start, tol=0. TensorLy has no masks: it runs on the
complete data; Tenfold runs on the complete data and with 30 % of the entries of both
missing (EM). Time per iteration: wall time of the call over its iterations, median of
`reps` calls. The error columns compare the final errors of the two libraries (complete
data; relative difference). The load average is recorded: on a shared machine compare the
ratios, not the times.
"""

import argparse
import os
import statistics
import time

import numpy as np
import tensorly as tl
from tensorly.decomposition import coupled_matrix_tensor_3d_factorization as tl_cmtf
from tensorly.decomposition import parafac2 as tl_parafac2
from tensorly.decomposition._parafac2 import initialize_decomposition
from tensorly.parafac2_tensor import parafac2_to_slices
from tensorly.random import random_parafac2

import tenfold


def _median_time(call, reps):
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def _parafac2_case(quick):
    rng = np.random.RandomState(0)
    shapes = [(int(rng.randint(100, 301)), 40) for _ in range(50)]
    truth = random_parafac2(shapes, rank=5, random_state=rng)
    slices = [s + 0.01 * np.linalg.norm(s) / np.sqrt(s.size) * rng.standard_normal(s.shape)
              for s in parafac2_to_slices(truth)]
    iters, reps = (5, 1) if quick else (20, 3)
    start = initialize_decomposition(slices, 5, init="random", random_state=1)
    w, f, p = start
    kw = dict(n_iter_max=iters, tol=1e-100, return_errors=True, linesearch=True)
    t_tl, (_, e_tl) = _median_time(
        lambda: tl_parafac2(slices, 5, init=(w, [x.copy() for x in f], p), **kw), reps)
    folded = [f[0], f[1] * np.asarray(w), f[2]]
    t_tf, (_, e_tf) = _median_time(
        lambda: tenfold.parafac2(slices, 5, init=(None, folded), **kw), reps)
    return {"case": "PARAFAC2 50 slices 100-300 x 40, rank 5", "iterations": iters,
            "tensorly_s": t_tl / iters, "tenfold_s": t_tf / iters,
            "ratio": t_tl / t_tf, "tensorly_error": float(e_tl[-1]),
            "tenfold_error": float(e_tf[-1]),
            "error_rel_diff": abs(float(e_tl[-1]) - float(e_tf[-1])) / float(e_tl[-1])}


def _cmtf_case(quick):
    rng = np.random.RandomState(0)
    i, j, k, m, r = 200, 100, 50, 300, 8
    a, b, c, v = (rng.standard_normal((n, r)) for n in (i, j, k, m))
    x = np.einsum("ir,jr,kr->ijk", a, b, c)
    y = a @ v.T
    x += 0.01 * np.linalg.norm(x) / np.sqrt(x.size) * rng.standard_normal(x.shape)
    y += 0.01 * np.linalg.norm(y) / np.sqrt(y.size) * rng.standard_normal(y.shape)
    start = [rng.random_sample((n, r)) for n in (i, j, k)]
    iters, reps = (3, 1) if quick else (10, 3)
    t_tl, (_, _, e_tl) = _median_time(
        lambda: tl_cmtf(x, y, r, init=(None, [s.copy() for s in start]), n_iter_max=iters, tol=0),
        reps)
    kw = dict(init=(None, start), n_iter_max=iters, tol=0)
    t_tf, (_, _, e_tf) = _median_time(
        lambda: tenfold.coupled_matrix_tensor_3d_factorization(x, y, r, **kw), reps)
    mx, my = rng.random_sample(x.shape) >= 0.3, rng.random_sample(y.shape) >= 0.3
    t_em, _ = _median_time(lambda: tenfold.coupled_matrix_tensor_3d_factorization(
        np.where(mx, x, np.nan), np.where(my, y, np.nan), r, mask="nan", **kw), reps)
    return {"case": "CMTF 200x100x50 + 200x300, rank 8", "iterations": iters,
            "tensorly_s": t_tl / iters, "tenfold_s": t_tf / iters,
            "ratio": t_tl / t_tf, "tenfold_30pct_missing_s": t_em / iters,
            "ratio_30pct_missing": t_tl / t_em, "tensorly_error": float(e_tl[-1]),
            "tenfold_error": float(e_tf[-1]),
            "error_rel_diff": abs(float(e_tl[-1]) - float(e_tf[-1])) / float(e_tl[-1])}


def run(quick: bool) -> list[dict]:
    """One row per case: seconds per iteration of each library, their ratio, final errors, and
    the load average before and after the case."""
    rows = []
    for case in (_parafac2_case, _cmtf_case):
        load = os.getloadavg()[0]
        row = case(quick)
        row["load_before"], row["load_after"] = load, os.getloadavg()[0]
        rows.append(row)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations, one rep")
    args = parser.parse_args()
    print(f"tensorly {tl.__version__}, tenfold {tenfold.__version__}, "
          f"{os.cpu_count()} CPUs, tenfold threads {tenfold.num_threads()}")
    print(f"{'case':<42} {'TensorLy s/it':>14} {'Tenfold s/it':>13} {'ratio':>7} "
          f"{'30% missing s/it':>17} {'ratio':>7} {'err diff':>9} {'load':>10}")
    for row in run(args.quick):
        em = row.get("tenfold_30pct_missing_s")
        print(f"{row['case']:<42} {row['tensorly_s']:14.5f} "
              f"{row['tenfold_s']:13.5f} {row['ratio']:7.1f} "
              f"{'' if em is None else f'{em:.5f}':>17} "
              f"{'' if em is None else format(row['ratio_30pct_missing'], '.1f'):>7} "
              f"{row['error_rel_diff']:9.1e} {row['load_before']:4.1f}/{row['load_after']:4.1f}")
