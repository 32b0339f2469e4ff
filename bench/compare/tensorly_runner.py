"""TensorLy side of the comparison (bench/compare/compare.sh): one measurement
per process, so that the peak resident memory is the case's own.

    python tensorly_runner.py gemm --dtype float64 --size 4000
    python tensorly_runner.py cp --dtype float64 --tensor x.npy --init u0.npy,u1.npy,u2.npy --iters 10
    python tensorly_runner.py tucker --dtype float64 --tensor x.npy --ranks 20,20,20 --iters 10

Prints one JSON line with the same fields as tenfold_compare_driver.
"""

import argparse
import json
import sys
import time

import numpy as np
import tensorly as tl
from tensorly.decomposition import parafac, tucker


def status_kib(field):
    """A field of /proc/self/status in KiB: VmRSS (resident now) or VmHWM (peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak():
    """Restarts peak tracking (Linux resets VmHWM on "5" in clear_refs); False if refused.
    (getrusage's ru_maxrss is no use here: it keeps the parent's peak across fork and exec.)"""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def warm_up(dtype):
    """Before the input is loaded, as in the driver: the BLAS threads come up and every
    thread's BLAS work buffers are touched in full (a tall, a wide and a square product),
    so that they count in the baseline and not as the algorithm's memory."""
    for m, n, k in ((16384, 64, 512), (64, 32768, 512), (1024, 1024, 1024)):
        np.full((m, k), 0.5, dtype=dtype) @ np.full((k, n), 0.25, dtype=dtype)


def run_gemm(args):
    n = args.size
    a = np.full((n, n), 0.5, dtype=args.dtype)
    b = np.full((n, n), 0.25, dtype=args.dtype)
    best = float("inf")
    for i in range(args.reps + 1):  # the first run warms up
        t0 = time.perf_counter()
        a @ b
        s = time.perf_counter() - t0
        if i > 0:
            best = min(best, s)
    return {"gflops": 2.0 * n**3 / best * 1e-9, "size": n}


def load_inputs(args):
    warm_up(args.dtype)
    x = np.load(args.tensor).astype(args.dtype, copy=False)
    factors = [np.load(p).astype(args.dtype, copy=False) for p in args.init.split(",")] if args.init else []
    return x, factors


def measure(step, x):
    """Runs step() once after resetting the peak; returns its result and the measurements."""
    rss_loaded = status_kib("VmRSS")
    peak_reset = reset_peak()
    t0 = time.perf_counter()
    out = step()
    seconds = time.perf_counter() - t0
    return out, {
        "seconds_total": seconds,
        "input_bytes": x.nbytes,
        "rss_loaded_kib": rss_loaded,
        "peak_rss_kib": status_kib("VmHWM"),
        "peak_reset": peak_reset,
    }


def run_cp(args):
    x, factors = load_inputs(args)
    rank = factors[0].shape[1]
    init = tl.cp_tensor.CPTensor((np.ones(rank, dtype=args.dtype), factors))
    # tol = 0 and no returned errors: TensorLy then skips its per-iteration error.
    cp, res = measure(
        lambda: parafac(x, rank, n_iter_max=args.iters, init=init, tol=0, normalize_factors=False,
                        linesearch=False),
        x,
    )
    x64 = x.astype(np.float64, copy=False)
    res["rel_error"] = float(np.linalg.norm(x64 - tl.cp_to_tensor(cp).astype(np.float64)) /
                             np.linalg.norm(x64))
    res["iters"] = args.iters
    return res


def run_cp_default(args):
    """parafac with nothing but the rank: its SVD start, tol 1e-8, at most 100 iterations."""
    x, _ = load_inputs(args)
    calls = []  # the callback sees the start, then every iteration
    cp, res = measure(lambda: parafac(x, args.rank, callback=lambda *_: calls.append(1)), x)
    x64 = x.astype(np.float64, copy=False)
    res["rel_error"] = float(np.linalg.norm(x64 - tl.cp_to_tensor(cp).astype(np.float64)) /
                             np.linalg.norm(x64))
    res["iters"] = len(calls) - 1
    return res


def run_tucker(args):
    """HOSVD (tucker with n_iter_max=0: truncated SVD of every unfolding, then the core),
    then, for --iters > 0, HOOI continued from it: tucker(init=that model, n_iter_max=iters),
    which is exactly what tucker(init="svd", n_iter_max=iters) computes, so one process
    times both. seconds_total covers both parts; peak_rss_kib is the larger peak."""
    x, _ = load_inputs(args)
    ranks = [int(r) for r in args.ranks.split(",")]
    model, res = measure(lambda: tucker(x, ranks, n_iter_max=0, init="svd", tol=0), x)
    res["seconds_hosvd"] = res["seconds_total"]
    res["rel_error_hosvd"] = tucker_error(x, model)
    res["peak_rss_kib_hosvd"] = res["peak_rss_kib"]
    if args.iters > 0:
        model, more = measure(
            lambda: tucker(x, ranks, n_iter_max=args.iters, init=model, tol=0), x)
        res["seconds_total"] += more["seconds_total"]
        res["peak_rss_kib"] = max(res["peak_rss_kib"], more["peak_rss_kib"])
        res["peak_reset"] = res["peak_reset"] and more["peak_reset"]
    res["rel_error"] = tucker_error(x, model)
    res["iters"] = args.iters
    return res


def tucker_error(x, model):
    x64 = x.astype(np.float64, copy=False)
    approx = tl.tucker_to_tensor(model).astype(np.float64)
    return float(np.linalg.norm(x64 - approx) / np.linalg.norm(x64))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("command", choices=["gemm", "cp", "cp_default", "tucker"])
    p.add_argument("--dtype", required=True, choices=["float32", "float64"])
    p.add_argument("--size", type=int)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--tensor")
    p.add_argument("--init")
    p.add_argument("--ranks")
    p.add_argument("--iters", type=int)
    p.add_argument("--rank", type=int)
    args = p.parse_args()
    tl.set_backend("numpy")
    out = {"gemm": run_gemm, "cp": run_cp, "cp_default": run_cp_default,
           "tucker": run_tucker}[args.command](args)
    out.update({"side": "tensorly", "command": args.command, "dtype": args.dtype})
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
