"""tenfold.parafac and tenfold.tucker against TensorLy, from the same Python process.

Usage (a virtual environment with tenfold installed by `pip install .` and tensorly):
    python bench/python_vs_tensorly.py            # the speed cases
    python bench/python_vs_tensorly.py --memory   # peak memory on a 1 GB tensor

CP: plain ALS on both sides (compress="off") from the same random factors, a fixed number of
iterations (tol=0, so TensorLy skips its error computation); the time per iteration
is the wall time of the call divided by the iterations. Tucker: one call each,
Tenfold's ST-HOSVD against TensorLy's `tucker` with n_iter_max=0 (its HOSVD start).
The binding overhead is the wall time of the tenfold call minus the library's own
total (`timings["total"]`), relative to the latter. "GEMM sweep" (3-way CP): half the
time of the three tensor-sized products that two plain ALS sweeps need, each timed as one
NumPy `matmul` on its own shape in the same round: the least a sweep of exact ALS costs
at the rate of NumPy's GEMM on those products, so that TensorLy/GEMM sweep is the ratio
a plain ALS running at that rate would reach. Each figure is the median of
--reps runs. The load average is printed before and after: on a shared machine,
compare the ratios, not the absolute times.

--settle S sleeps S seconds before each timed call. By default (0) each call follows the
other library's at once, as in a script that mixes them: after TensorLy's GEMMs NumPy's
own OpenBLAS threads spin for about 0.1 s (its thread timeout), and a Tenfold call that
starts then shares the cores with them (docs/python.md, "Threads"). With --settle 0.3
each call starts on a quiet machine: each library's own speed.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import tensorly as tl
from tensorly.cp_tensor import CPTensor
from tensorly.decomposition import parafac as tl_parafac
from tensorly.decomposition import tucker as tl_tucker

import tenfold

CASES = [
    ("cp", (100, 100, 100), 10, 20, None),
    ("cp", (200, 200, 200), 16, 10, None),
    ("cp", (200, 200, 200), 64, 10, 3.0),
    ("tucker", (200, 200, 200), 20, 0, None),
    ("tucker", (300, 300, 300), 30, 0, 20.0),
    ("cp", (400, 400, 400), 32, 5, None),
]


def timed(f, settle):
    time.sleep(settle)
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def gemm_sweep(x, start):
    """Seconds of half the three tensor-sized products of two 3-way sweeps (one
    contraction with each factor: Y_n = X x_n U_n^T), each one NumPy GEMM call on the
    product's own shape into an output written before: the least a plain ALS sweep of
    1.5 passes over the tensor costs at NumPy's GEMM rate on these shapes
    (docs/algorithms.md, "Order 3")."""
    i0, i1, i2 = x.shape
    rank = start[0].shape[1]
    products = (
        (x.reshape(i0, i1 * i2).T, start[0], np.empty((i1 * i2, rank), x.dtype)),  # X_(0)^T U_0
        (x.transpose(0, 2, 1), start[1], np.empty((i0, i2, rank), x.dtype)),  # slab by slab
        (x.reshape(i0 * i1, i2), start[2], np.empty((i0 * i1, rank), x.dtype)),  # X_(01) U_2
    )
    for a, b, out in products:
        out.fill(0)  # its pages touched before the clock
    total = 0.0
    for a, b, out in products:
        t = time.perf_counter()
        np.matmul(a, b, out=out)
        total += time.perf_counter() - t
    return total / 2


def cp_case(dims, rank, iters, reps, rng, dtype, settle):
    x = rng.random(dims).astype(dtype)
    start = [rng.random((n, rank)).astype(dtype) for n in dims]
    ours, theirs, overhead, bound = [], [], [], []
    for _ in range(reps):
        # Plain ALS on both sides: compression first would time another algorithm.
        wall, r = timed(lambda: tenfold.parafac(x, rank, init=(None, start), n_iter_max=iters,
                                                tol=0, compress="off"), settle)
        ours.append(wall / iters)
        overhead.append((wall - r.timings["total"]) / r.timings["total"])
        init = CPTensor((np.ones(rank), [f.copy() for f in start]))
        wall, _ = timed(lambda: tl_parafac(x, rank, init=init, n_iter_max=iters, tol=0), settle)
        theirs.append(wall / iters)
        if len(dims) == 3:
            time.sleep(settle)
            bound.append(gemm_sweep(x, start))
    return (statistics.median(ours), statistics.median(theirs), statistics.median(overhead),
            statistics.median(bound) if bound else None, "s/it")


def tucker_case(dims, rank, reps, rng, dtype, settle):
    x = rng.random(dims).astype(dtype)
    ranks = [rank] * len(dims)
    ours, theirs, overhead = [], [], []
    for _ in range(reps):
        wall, r = timed(lambda: tenfold.tucker(x, rank=ranks), settle)
        ours.append(wall)
        overhead.append((wall - r.timings["total"]) / r.timings["total"])
        wall, _ = timed(lambda: tl_tucker(x, rank=ranks, n_iter_max=0, init="svd"), settle)
        theirs.append(wall)
    return statistics.median(ours), statistics.median(theirs), statistics.median(overhead), None, "s"


def speed(reps, only, dtype, settle):
    rng = np.random.default_rng(0)
    print(f"tenfold {tenfold.__version__} ({tenfold.num_threads()} threads), "
          f"tensorly {tl.__version__}, numpy {np.__version__}, Python {sys.version.split()[0]}")
    print("load average at the start: %.2f %.2f %.2f" % os.getloadavg())
    print(f"sleep before each timed call: {settle} s")
    print("| case | unit | Tenfold | TensorLy | TensorLy/Tenfold | target | binding overhead | "
          "GEMM sweep | TensorLy/GEMM sweep |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, (kind, dims, rank, iters, target) in enumerate(CASES):
        if only and i not in only:
            continue
        shape = "x".join(map(str, dims))
        if kind == "cp":
            label = f"parafac {shape} R{rank} {dtype}, {iters} iterations"
            t, tl_t, over, gemm, unit = cp_case(dims, rank, iters, reps, rng, dtype, settle)
        else:
            label = f"tucker ST-HOSVD {shape} ranks {rank} {dtype}"
            t, tl_t, over, gemm, unit = tucker_case(dims, rank, reps, rng, dtype, settle)
        ratio = tl_t / t
        mark = "" if target is None else f">= {target:g} " + ("✓" if ratio >= target else "✗")
        bound = "| |" if gemm is None else f"| {gemm:.4f} | {tl_t / gemm:.1f} |"
        print(f"| {label} | {unit} | {t:.4f} | {tl_t:.4f} | {ratio:.1f} | {mark} | "
              f"{100 * over:.2f} % {bound}", flush=True)
    print("load average at the end: %.2f %.2f %.2f" % os.getloadavg())


PEAK = """
import resource, sys, numpy as np, tenfold
n = 512  # 512^3 float64: 1.07 GB
x = np.empty((n, n, n), order=sys.argv[1])
x[...] = np.random.default_rng(0).random((n, n, 1))
x += np.arange(n)[None, :, None] * 1e-3
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if sys.argv[2] == "parafac":
    tenfold.parafac(x, 8, n_iter_max=2, init="random")
else:
    tenfold.tucker(x, rank=30)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(f"{sys.argv[2]}, {sys.argv[1]} order: tensor {x.nbytes / 2**20:.0f} MiB, peak before the call "
      f"{before / 2**20:.0f} MiB, peak after {after / 2**20:.0f} MiB, growth "
      f"{(after - before) / 2**20:.0f} MiB ({(after - before) / x.nbytes:.2f} of the tensor)")
"""


def memory():
    for call in ("parafac", "tucker"):
        for order in ("F", "C"):
            out = subprocess.run([sys.executable, "-c", PEAK, order, call], capture_output=True,
                                 text=True, check=True)
            print(out.stdout.strip(), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--cases", type=int, nargs="*", default=[],
                   help="indices into CASES to run (default: all)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="precision of the tensor and the start (both libraries)")
    p.add_argument("--memory", action="store_true", help="peak memory on a 1 GB tensor")
    p.add_argument("--settle", type=float, default=0.0,
                   help="seconds of sleep before each timed call (default 0: back to back)")
    a = p.parse_args()
    memory() if a.memory else speed(a.reps, set(a.cases), a.dtype, a.settle)


if __name__ == "__main__":
    main()
