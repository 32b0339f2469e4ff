"""A TensorLy script with and without `tenfold.tensorly.patch()`, end to end.

Usage (tenfold and tensorly importable):
    python bench/tensorly_patch.py [--reps 3]

Each case is one call of `tensorly.decomposition.parafac` as a TensorLy user writes it
(TensorLy's default SVD start, its stopping rule), timed whole: TensorLy's start, the
sweeps, the error history. The two runs of a case alternate (TensorLy, patched, ...)
so that both see the same load; each figure is the median of --reps runs. Cases: the
README's demo (the COVID-19 tensor of tests/data, rank 2, n_iter_max=1000, tol=1e-8),
a planted 200^3 rank-16 tensor with 10 % noise (n_iter_max=100, tol=1e-8) and a planted
complex128 100^3 rank-10 tensor with 10 % noise (the same arguments); --case runs the
cases whose name contains the given text.
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
import tensorly as tl
import tensorly.decomposition as dec

import tenfold.tensorly as tt

ROOT = Path(__file__).resolve().parents[1]


def planted(shape, rank, noise, seed, complex_=False):
    rng = np.random.default_rng(seed)

    def draw(size):
        return rng.standard_normal(size) + (1j * rng.standard_normal(size) if complex_ else 0)

    x = tl.cp_to_tensor((None, [draw((n, rank)) for n in shape]))
    e = draw(shape)
    return x + noise * np.linalg.norm(x) / np.linalg.norm(e) * e


def run(x, kwargs, patched):
    tt.patch() if patched else tt.unpatch()
    t0 = time.perf_counter()
    cp, errors = dec.parafac(x, return_errors=True, **kwargs)
    seconds = time.perf_counter() - t0
    err = float(np.linalg.norm(x - tl.cp_to_tensor(cp)) / np.linalg.norm(x))
    return seconds, len(errors), err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--case", default="", help="run only the cases whose name contains this")
    args = ap.parse_args()
    cases = [
        ("COVID-19 438x6x11, R=2 (README demo)", np.load(ROOT / "tests/data/COVID19_data.npy"),
         dict(rank=2, n_iter_max=1000, tol=1e-8)),
        ("planted 200^3, R=16, 10% noise", planted((200, 200, 200), 16, 0.1, 0),
         dict(rank=16, n_iter_max=100, tol=1e-8)),
        ("planted complex 100^3, R=10, 10% noise", planted((100, 100, 100), 10, 0.1, 0, True),
         dict(rank=10, n_iter_max=100, tol=1e-8)),
    ]
    cases = [c for c in cases if args.case in c[0]]
    print(f"load average before: {os.getloadavg()}")
    for name, x, kwargs in cases:
        times = {False: [], True: []}
        for _ in range(args.reps):
            for patched in (False, True):
                seconds, iters, err = run(x, kwargs, patched)
                times[patched].append(seconds)
                print(f"  {name} {'patched' if patched else 'TensorLy'}: {seconds:.3f} s, "
                      f"{iters} errors, relative error {err:.6g}", flush=True)
        a, b = statistics.median(times[False]), statistics.median(times[True])
        print(f"{name}: TensorLy {a:.3f} s, patched {b:.3f} s, speedup {a / b:.2f}x")
    tt.unpatch()
    print(f"calls: {tt.calls()}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
