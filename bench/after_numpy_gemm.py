"""tenfold.parafac right after a NumPy matrix product, against the same call on a quiet
machine, with Tenfold's two threads and with one.

NumPy's OpenBLAS keeps its worker threads spinning for about 0.1 s after a product
(docs/performance.md, "Back to back and settled"); a Tenfold call that starts in that
window shares the cores with them. Medians of --reps calls, each "quiet" call after a
0.15 s sleep, each "after" call right after three 600 x 600 products:
    python bench/after_numpy_gemm.py [--dtype float32] [--reps 7]
"""

import argparse
import statistics
import time

import numpy as np

import tenfold


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    x = rng.random((200, 200, 200)).astype(a.dtype)
    start = [rng.random((200, 64)).astype(a.dtype) for _ in range(3)]
    m = rng.random((600, 600))

    def call():
        t = time.perf_counter()
        tenfold.parafac(x, 64, init=(None, start), n_iter_max=10, tol=0, compress="off")
        return time.perf_counter() - t

    default = tenfold.num_threads()
    print(f"parafac 200^3 R64 {a.dtype}, 10 iterations, seconds per call (medians of {a.reps})")
    for threads in (default, 1, default):
        tenfold.set_num_threads(threads)
        quiet, after = [], []
        for _ in range(a.reps):
            time.sleep(0.15)
            quiet.append(call())
            for _ in range(3):
                m @ m
            after.append(call())
        print(f"{threads} Tenfold threads: quiet {statistics.median(quiet):.4f}, "
              f"after NumPy's products {statistics.median(after):.4f}", flush=True)
    tenfold.set_num_threads(default)


if __name__ == "__main__":
    main()
