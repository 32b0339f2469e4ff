"""CP beyond plain ALS, Tenfold (the `tenfold` program) against TensorLy in the same run.

    python compare_variants.py --cli build/tools/tenfold planted [--seeds 2]
    python compare_variants.py --cli build/tools/tenfold planted-large [--seeds 4]
                               [--sizes 128x16,200x32,300x32] [--tensorly-max-size 200]
                               [--factors gaussian|collinear]
    python compare_variants.py --cli build/tools/tenfold il2
    python compare_variants.py --cli build/tools/tenfold covid
    python compare_variants.py --cli build/tools/tenfold swamp [--seeds 5]

Run it with the interpreter of bench/compare's environment (TensorLy, NumPy, SciPy
pinned in bench/compare/requirements.txt). Each command prints a Markdown table.

planted: fraction of planted problems recovered (factor match score >= 0.99) by each
  start: tenfold's default (auto = nvecs here), one random start, best of 5 random
  starts, and TensorLy's default parafac (init="svd"). Orders 3 (25^3) and 4 (20^4),
  ranks 3, 10, 20, collinearity 0, 0.5, 0.9, noise 0 and 10 %.
planted-large: planted I^3 rank-R problems large enough for compression first, 1 %
  noise, factors Gaussian (the default; cosines and norms vary at random) or with
  collinearity 0.3 (unit columns of pairwise cosine 0.3, weights in [1, 2)), each
  library as a user calls it: tenfold's default
  (compression first, several starts on the core), the same with --n-starts 1 (one
  start, the default before), and TensorLy's default parafac (init="svd", at most 100
  iterations, tol 1e-8; only up to --tensorly-max-size, its SVD start being slow).
  Recovered: factor match score >= 0.99; each cell "recovered/seeds, median seconds".
il2: the IL-2 tensor with its NaN entries missing, rank 1..5, tenfold --missing nan
  against TensorLy parafac(mask=...) from the same start (the same random factors, the
  missing entries filled with the mean of the observed ones before the first sweep,
  which is where tenfold's EM starts), fit over the observed entries.
covid: the COVID-19 tensor, non-negative CP (tenfold --nonnegative against TensorLy's
  non_negative_parafac_hals) from the same non-negative start, fit and s/iteration.
swamp: collinearity-0.9 planted problems: iterations until the fit of a converged plain
  ALS run is reached, plain ALS against --line-search, and TensorLy with and without
  linesearch=True, all from the same random start.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import tensorly as tl
from scipy.optimize import linear_sum_assignment
from tensorly.decomposition import non_negative_parafac_hals, parafac

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "tests", "data")


# --- planted problems (Tomasi and Bro's construction, as tenfold's random_cp_tensor) ----

def collinear_factor(rng, rows, rank, c):
    q, _ = np.linalg.qr(rng.standard_normal((rows, rank)))
    g = (1 - c) * np.eye(rank) + c * np.ones((rank, rank))
    return q @ np.linalg.cholesky(g).T


def planted(dims, rank, c, noise, seed):
    rng = np.random.default_rng(seed)
    factors = [collinear_factor(rng, d, rank, c) for d in dims]
    weights = rng.uniform(1, 2, rank)
    x = tl.cp_to_tensor((weights, factors))
    n = rng.standard_normal(x.shape)
    x = x + noise * np.linalg.norm(x) / np.linalg.norm(n) * n
    return x, (weights, factors)


def fms(a, b):
    """Factor match score (no weight penalty), optimal matching of components."""
    def unit(f):
        return f / np.maximum(np.linalg.norm(f, axis=0), 1e-300)
    cong = np.ones((a[1][0].shape[1], b[1][0].shape[1]))
    for fa, fb in zip(a[1], b[1]):
        cong *= np.abs(unit(fa).T @ unit(fb))
    rows, cols = linear_sum_assignment(-cong)
    return float(cong[rows, cols].mean())


# --- running tenfold ------------------------------------------------------------------

def run_tenfold(cli, x, rank, *flags, init_factors=None, tmp):
    """Runs `tenfold cp` on x; returns (report, (weights, factors)) with factors per NumPy
    axis. x is saved in Fortran order, where tenfold's modes are the NumPy axes, so that
    both libraries sweep the modes in the same order."""
    path = os.path.join(tmp, "x.npy")
    np.save(path, np.asfortranarray(x))
    out = os.path.join(tmp, "out")
    cmd = [cli, "cp", path, "--rank", str(rank), "--out", out, "-q", *flags]
    if init_factors is not None:
        start = os.path.join(tmp, "start")
        os.makedirs(start, exist_ok=True)
        for a, f in enumerate(init_factors):
            np.save(os.path.join(start, f"factor_{a}.npy"), f)
        cmd += ["--init-factors", start]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    weights = np.load(os.path.join(out, "weights.npy"))
    factors = [np.load(os.path.join(out, f"factor_{a}.npy")) for a in range(x.ndim)]
    return report, (weights, factors)


def observed_fit(x, mask, cp):
    m = tl.cp_to_tensor(cp)
    return 1 - np.linalg.norm((x - m)[mask]) / np.linalg.norm(x[mask])


# --- commands ---------------------------------------------------------------------------

def cmd_planted(args, tmp):
    cases = [((25, 25, 25), 3), ((20, 20, 20, 20), 4)]
    print("| order | rank | collinearity | noise | tenfold default | tenfold random | "
          "tenfold best of 5 random | TensorLy default (svd) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    totals = np.zeros(4)
    count = 0
    for dims, order in cases:
        for rank in (3, 10, 20):
            for c in (0.0, 0.5, 0.9):
                for noise in (0.0, 0.1):
                    hits = np.zeros(4)
                    for s in range(args.seeds):
                        x, truth = planted(dims, rank, c, noise, 1000 * rank + 10 * s + order)
                        common = ["--max-iters", "500", "--tol", "1e-9"]
                        runs = [
                            run_tenfold(args.cli, x, rank, *common, tmp=tmp)[1],
                            run_tenfold(args.cli, x, rank, *common, "--init", "random",
                                        "--seed", str(s), tmp=tmp)[1],
                            run_tenfold(args.cli, x, rank, *common, "--init", "random",
                                        "--seed", str(s), "--n-starts", "5", tmp=tmp)[1],
                        ]
                        tl_cp = parafac(x, rank, n_iter_max=500, tol=1e-9, init="svd")
                        runs.append((tl_cp.weights, tl_cp.factors))
                        hits += [fms(r, truth) >= 0.99 for r in runs]
                    totals += hits
                    count += args.seeds
                    cells = " | ".join(f"{h:.0f}/{args.seeds}" for h in hits)
                    print(f"| {order} | {rank} | {c} | {noise:.0%} | {cells} |", flush=True)
    cells = " | ".join(f"{t / count:.0%}" for t in totals)
    print(f"| all | | | | {cells} |")


def gaussian_planted(size, rank, noise, seed):
    """I^3 with standard normal factors (unit weights) plus relative Gaussian noise."""
    rng = np.random.default_rng(seed)
    factors = [rng.standard_normal((size, rank)) for _ in range(3)]
    x = tl.cp_to_tensor((None, factors))
    n = rng.standard_normal(x.shape)
    return x + noise * np.linalg.norm(x) / np.linalg.norm(n) * n, (np.ones(rank), factors)


def cmd_planted_large(args, tmp):
    print("| problem | tenfold default | tenfold --n-starts 1 | TensorLy default (svd) |")
    print("| --- | --- | --- | --- |")
    totals, count = np.zeros(3), np.zeros(3)
    for spec in args.sizes.split(","):
        size, rank = (int(v) for v in spec.split("x"))
        hits, seconds = np.zeros(3), [[], [], []]
        with_tensorly = size <= args.tensorly_max_size
        for s in range(args.seeds):
            seed = 7000 + 100 * size + s
            if args.factors == "collinear":
                x, truth = planted((size,) * 3, rank, 0.3, 0.01, seed)
            else:
                x, truth = gaussian_planted(size, rank, 0.01, seed)
            for k, flags in enumerate(([], ["--n-starts", "1"])):
                rep, cp = run_tenfold(args.cli, x, rank, *flags, tmp=tmp)
                hits[k] += fms(cp, truth) >= 0.99
                seconds[k].append(rep["seconds"])
            if with_tensorly:
                t0 = time.perf_counter()
                tl_cp = parafac(x, rank)
                seconds[2].append(time.perf_counter() - t0)
                hits[2] += fms((tl_cp.weights, tl_cp.factors), truth) >= 0.99
        runs = [args.seeds, args.seeds, args.seeds if with_tensorly else 0]
        totals += hits
        count += runs
        cells = [f"{h:.0f}/{n}, {np.median(t):.3g} s" if n else "not run"
                 for h, n, t in zip(hits, runs, seconds)]
        print(f"| {size}^3 R{rank} | " + " | ".join(cells) + " |", flush=True)
    cells = [f"{t / n:.0%}" if n else "-" for t, n in zip(totals, count)]
    print("| all | " + " | ".join(cells) + " |")


def cmd_il2(args, tmp):
    x = np.load(os.path.join(DATA, "IL2_Response_Tensor.npy")).astype(np.float64)
    mask = ~np.isnan(x)
    filled = np.where(mask, x, x[mask].mean())
    print(f"IL-2 tensor {x.shape}, {np.count_nonzero(~mask)} missing; {args.iters} sweeps, "
          "same random start")
    print("| rank | tenfold fit (observed) | TensorLy fit (observed) | difference |")
    print("| --- | --- | --- | --- |")
    rng = np.random.default_rng(5)
    for rank in range(1, 6):
        start = [rng.uniform(0, 1, (d, rank)) for d in x.shape]
        rep, tf = run_tenfold(args.cli, x, rank, "--missing", "nan", "--max-iters",
                              str(args.iters), "--tol", "0", init_factors=start, tmp=tmp)
        tl_cp = parafac(filled, rank, n_iter_max=args.iters, tol=0,
                        init=tl.cp_tensor.CPTensor((np.ones(rank), [f.copy() for f in start])),
                        mask=mask.astype(np.float64))
        ft, fl = observed_fit(x, mask, tf), observed_fit(x, mask, tl_cp)
        assert abs(ft - rep["fit"]) < 1e-8, (ft, rep["fit"])
        print(f"| {rank} | {ft:.8f} | {fl:.8f} | {ft - fl:.1e} |", flush=True)


def cmd_covid(args, tmp):
    x = np.load(os.path.join(DATA, "COVID19_data.npy")).astype(np.float64)
    print(f"COVID-19 tensor {x.shape}; {args.iters} sweeps, same non-negative random start")
    print("| rank | tenfold fit | TensorLy fit | tenfold s/iter | TensorLy s/iter | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(6)
    norm = np.linalg.norm(x)
    for rank in (3, 5, 10):
        start = [rng.uniform(0, 1, (d, rank)) for d in x.shape]
        rep, tf = run_tenfold(args.cli, x, rank, "--nonnegative", "--max-iters",
                              str(args.iters), "--tol", "0", init_factors=start, tmp=tmp)
        t0 = time.perf_counter()
        tl_cp = non_negative_parafac_hals(
            x, rank, n_iter_max=args.iters, tol=0,
            init=tl.cp_tensor.CPTensor((np.ones(rank), [f.copy() for f in start])))
        tl_s = (time.perf_counter() - t0) / args.iters
        tf_s = rep["seconds"] / rep["iterations"]
        ft = 1 - np.linalg.norm(x - tl.cp_to_tensor(tf)) / norm
        fl = 1 - np.linalg.norm(x - tl.cp_to_tensor(tl_cp)) / norm
        print(f"| {rank} | {ft:.6f} | {fl:.6f} | {tf_s:.2e} | {tl_s:.2e} | {tl_s / tf_s:.1f} |",
              flush=True)


def iterations_to(history, target):
    for i, f in enumerate(history):
        if f >= target:
            return i + 1
    return None


def cmd_swamp(args, tmp):
    print("Iterations to reach the fit of converged plain ALS (minus 1e-6), "
          "collinearity 0.9, same random start")
    print("| problem | seed | tenfold plain | tenfold --line-search | TensorLy | "
          "TensorLy linesearch |")
    print("| --- | --- | --- | --- | --- | --- |")
    rows = []
    for dims, rank in (((30, 30, 30), 5), ((15, 15, 15, 15), 4)):
        for s in range(args.seeds):
            x, _ = planted(dims, rank, 0.9, 0.0, 77 + s)
            rng = np.random.default_rng(s)
            start = [rng.uniform(0, 1, (d, rank)) for d in dims]
            rep, _ = run_tenfold(args.cli, x, rank, "--max-iters", "5000", "--tol", "1e-10",
                                 init_factors=start, tmp=tmp)
            target = rep["fit"] - 1e-6
            rep_ls, _ = run_tenfold(args.cli, x, rank, "--max-iters", "5000", "--tol", "1e-10",
                                    "--line-search", init_factors=start, tmp=tmp)
            row = [iterations_to(rep["fit_history"], target),
                   iterations_to(rep_ls["fit_history"], target)]
            norm = np.linalg.norm(x)
            for ls in (False, True):
                _, errs = parafac(x, rank, n_iter_max=5000, tol=1e-10, linesearch=ls,
                                  init=tl.cp_tensor.CPTensor((np.ones(rank),
                                                              [f.copy() for f in start])),
                                  return_errors=True)
                row.append(iterations_to([1 - e for e in errs], target))
            rows.append(row)
            cells = " | ".join("-" if v is None else str(v) for v in row)
            print(f"| {'x'.join(map(str, dims))} R{rank} | {s} | {cells} |", flush=True)
    med = [np.median([r[k] if r[k] is not None else 5000 for r in rows]) for k in range(4)]
    print("| median | | " + " | ".join(f"{m:.0f}" for m in med) + " |")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cli", required=True, help="path of the tenfold program")
    p.add_argument("command", choices=["planted", "planted-large", "il2", "covid", "swamp"])
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--sizes", default="128x16,200x32,300x32",
                   help="planted-large: SIZExRANK problems, comma-separated")
    p.add_argument("--factors", default="gaussian", choices=["gaussian", "collinear"],
                   help="planted-large: the factors' law")
    p.add_argument("--tensorly-max-size", type=int, default=200,
                   help="planted-large: run TensorLy up to this size")
    p.add_argument("--iters", type=int, default=200)
    args = p.parse_args()
    tl.set_backend("numpy")
    with tempfile.TemporaryDirectory() as tmp:
        {"planted": cmd_planted, "planted-large": cmd_planted_large, "il2": cmd_il2, "covid": cmd_covid,
         "swamp": cmd_swamp}[args.command](args, tmp)


if __name__ == "__main__":
    sys.exit(main())
