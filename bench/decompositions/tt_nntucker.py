"""Tensor train and non-negative Tucker: Tenfold against TensorLy (NumPy backend), same data
and start, from the same Python process.

Usage (a virtual environment with tenfold installed by `pip install .` and tensorly):
    python bench/decompositions/tt_nntucker.py           # the issue's sizes
    python bench/decompositions/tt_nntucker.py --quick   # small sizes, a smoke run

Tensor train: one call each (TT-SVD is not iterative), tenfold.tensor_train against
tensorly.decomposition.tensor_train at the same ranks; the seconds are per call.
Non-negative Tucker: both methods from TensorLy's own random start (its initialize_tucker,
computed once and passed to both as init=(core, factors)), a fixed number of iterations (tol=0), the
seconds per iteration the call's wall time over the iterations; the relative errors after
the last iteration are printed side by side, so equal work is visible. Each figure is the
median of --reps runs; the load average is printed before and after (a shared machine:
compare the ratios). run(quick) returns the rows for bench/decompositions/run.py.
"""

import argparse
import os
import statistics
import time

import numpy as np

# (name, shape, rank, iterations); TT's iterations are 1 (one call)
CASES = [
    ("tensor_train", (30, 30, 30, 30, 30), 10, 1),
    ("non_negative_tucker", (150, 150, 150), 10, 10),
    ("non_negative_tucker_hals", (150, 150, 150), 10, 10),
]
QUICK = [
    ("tensor_train", (12, 12, 12, 12), 5, 1),
    ("non_negative_tucker", (40, 40, 40), 5, 5),
    ("non_negative_tucker_hals", (40, 40, 40), 5, 5),
]


def _median_seconds(f, reps):
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def _case(name, shape, rank, iters, reps, dtype):
    import tensorly as tl
    from tensorly import decomposition as dec
    from tensorly.decomposition._tucker import initialize_tucker

    import tenfold

    rng = np.random.default_rng(0)
    if name == "tensor_train":
        x = rng.random(shape).astype(dtype)
        ours_s, ours = _median_seconds(lambda: tenfold.tensor_train(x, rank=rank), reps)
        theirs_s, ref = _median_seconds(lambda: dec.tensor_train(x, rank), reps)
        ours_err, ref_err = (float(np.linalg.norm(tl.tt_to_tensor(m) - x) / np.linalg.norm(x))
                             for m in (ours, ref))
    else:
        # a non-negative low-rank tensor with noise; TensorLy's random start (from its NNDSVD
        # start TensorLy's HALS overflows on this tensor)
        core = rng.random((rank,) * len(shape))
        factors = [rng.random((s, rank)) for s in shape]
        x = np.abs(tl.tucker_to_tensor((core, factors)) + 0.1 * rng.standard_normal(shape))
        x = x.astype(dtype)
        ranks = [rank] * len(shape)
        start = initialize_tucker(x, ranks, range(len(shape)), init="random", random_state=0,
                                  non_negative=True)
        copy = lambda: (start[0].copy(), [f.copy() for f in start[1]])  # noqa: E731
        ours_fn, theirs_fn = getattr(tenfold, name), getattr(dec, name)
        kw = dict(n_iter_max=iters, tol=0, return_errors=True)
        ours_s, (ours, errors) = _median_seconds(lambda: ours_fn(x, ranks, init=copy(), **kw),
                                                 reps)
        theirs_s, (ref, ref_errors) = _median_seconds(
            lambda: theirs_fn(x, ranks, init=copy(), **kw), reps)
        ours_s, theirs_s = ours_s / iters, theirs_s / iters
        ours_err, ref_err = float(errors[-1]), float(ref_errors[-1])
    return {"case": name, "shape": "x".join(map(str, shape)), "rank": rank,
            "dtype": np.dtype(dtype).name, "iterations": iters,
            "tensorly_s": theirs_s, "tenfold_s": ours_s, "ratio": theirs_s / ours_s,
            "tensorly_error": ref_err, "tenfold_error": ours_err}


def run(quick, reps=None, dtypes=(np.float64,)):
    """The rows: per case and dtype, TensorLy's and Tenfold's seconds (per call for TT, per
    iteration for non-negative Tucker), their ratio and both final relative errors."""
    reps = reps or (1 if quick else 3)
    return [_case(*case, reps, dtype) for dtype in dtypes for case in (QUICK if quick else CASES)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--float32", action="store_true", help="also float32")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    rows = run(args.quick, args.reps,
               (np.float64, np.float32) if args.float32 else (np.float64,))
    print(f"{'case':<26}{'shape':<16}{'rank':>5}{'dtype':>9}{'TensorLy s':>12}"
          f"{'Tenfold s':>11}{'ratio':>8}{'TensorLy err':>14}{'Tenfold err':>13}")
    for r in rows:
        print(f"{r['case']:<26}{r['shape']:<16}{r['rank']:>5}{r['dtype']:>9}"
              f"{r['tensorly_s']:>12.4f}{r['tenfold_s']:>11.4f}{r['ratio']:>8.1f}"
              f"{r['tensorly_error']:>14.6g}{r['tenfold_error']:>13.6g}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
