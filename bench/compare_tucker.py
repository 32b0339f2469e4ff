#!/usr/bin/env python3
"""TensorLy's Tucker on the tensors of bench_tucker.cpp, for side-by-side tables.

Builds the same tensors (closed formula, integer-hash noise), runs tensorly's tucker
with n_iter_max=0 (truncated HOSVD) and n_iter_max=10, tol=0 (HOOI, 10 sweeps), and
prints the wall time and relative error of each. Usage:
    python3 bench/compare_tucker.py [--sizes 200:20 300:30] [--dtypes float64 float32]
"""
import argparse
import time

import numpy as np
import tensorly as tl
from tensorly.decomposition import tucker


def hash_noise(n):
    """bench_tucker.cpp's hash_noise(l) for l = 0..n-1."""
    h = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    h = (h ^ (h >> np.uint64(31))) * np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(29)
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53 - 0.5


def test_tensor(size, rank):
    """G x_0 U x_1 U x_2 U + E, as bench_tucker.cpp's test_tensor (float64)."""
    a, b, c = np.meshgrid(np.arange(rank), np.arange(rank), np.arange(rank), indexing="ij")
    core = np.sin(1.0 + a + 2.0 * b + 3.0 * c)
    i, j = np.meshgrid(np.arange(1, size + 1), np.arange(1, rank + 1), indexing="ij")
    u = np.sin(0.37 * i * j)
    x = tl.tucker_to_tensor((core, [u, u, u]))
    # Column-major linear index l: E is laid out in Fortran order.
    e = hash_noise(size**3).reshape((size, size, size), order="F")
    return x + 0.1 * np.linalg.norm(x) / np.linalg.norm(e) * e


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=["200:20", "300:30"])
    p.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    args = p.parse_args()
    print(f"tensorly {tl.__version__}, numpy {np.__version__}")
    print(f"{'case':<28}{'seconds':>10}{'rel_error':>14}")
    for spec in args.sizes:
        size, rank = (int(v) for v in spec.split(":"))
        x64 = test_tensor(size, rank)
        for dtype in args.dtypes:
            x = x64.astype(dtype)
            nx = np.linalg.norm(x64)
            for name, iters in (("hosvd (n_iter_max=0)", 0), ("hooi (10 sweeps)", 10)):
                t0 = time.perf_counter()
                core, factors = tucker(x, rank=[rank] * 3, n_iter_max=iters, tol=0.0, init="svd")
                seconds = time.perf_counter() - t0
                xhat = tl.tucker_to_tensor((core, factors)).astype(np.float64)
                err = np.linalg.norm(x64 - xhat) / nx
                print(f"{size}^3 r{rank} {dtype} {name:<16}{seconds:>8.2f}{err:>16.10f}")


if __name__ == "__main__":
    main()
