"""CP-APR of Tenfold against pyttb's cp_apr (algorithm 'mu') on the same counts and start.

    PYTHONPATH=<tenfold package> python bench/sparse/cp_apr_vs_pyttb.py [--shape 300,200,100]
        [--rank 5] [--iters 50] [--seed 0]

Draws Poisson counts from a planted nonnegative rank-R model (gamma-distributed columns,
so the tensor is sparse), one random start, and runs both with the Tensor Toolbox's
defaults (tol 1e-4, 10 inner iterations, kappa 0.01; --kappa 0 for the same iteration in
both) for at most --iters outer iterations. Prints, per program, the iterations, the Poisson log-likelihood
sum x log m - sum m of its model (computed here the same way for both), and the seconds
per outer iteration. Needs numpy and pyttb (pip install pyttb) and the tenfold package.
"""

import argparse
import time

import numpy as np
import pyttb as ttb

import tenfold


def log_likelihood(subs, vals, weights, factors):
    m = weights[None, :] * np.prod([f[subs[:, n]] for n, f in enumerate(factors)], axis=0)
    return float(np.sum(vals * np.log(m.sum(axis=1))) - np.sum(weights * np.prod([f.sum(axis=0) for f in factors], axis=0)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="300,200,100")
    p.add_argument("--rank", type=int, default=5)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    # pyttb 1.8 shifts entries with Phi > 0 where the Tensor Toolbox (and Tenfold) shift
    # those with Phi > 1; kappa = 0 turns the shift off and both run the same iteration.
    p.add_argument("--kappa", type=float, default=0.01)
    a = p.parse_args()
    shape = tuple(int(s) for s in a.shape.split(","))
    rng = np.random.default_rng(a.seed)
    truth = [rng.gamma(0.2, 1.0, (n, a.rank)) for n in shape]
    truth = [f / f.sum(axis=0) for f in truth]
    rate = np.einsum("ir,jr,kr,r->ijk", *truth, np.full(a.rank, 20.0 * np.prod(shape) ** 0.5))
    x = rng.poisson(rate).astype(np.float64)
    subs = np.argwhere(x > 0)
    vals = x[x > 0]
    start = [rng.random((n, a.rank)) for n in shape]
    print(f"shape {shape}, rank {a.rank}, nnz {len(vals)}, sum {vals.sum():.0f}")

    t0, c0 = time.perf_counter(), time.process_time()
    res = tenfold.cp_apr((subs.T.copy(), vals, shape), a.rank, n_iter_max=a.iters, init=start,
                         kappa=a.kappa)
    t_tf, c_tf = time.perf_counter() - t0, time.process_time() - c0
    ll_tf = log_likelihood(subs, vals, np.asarray(res.weights), res.factors)

    sp = ttb.sptensor(subs, vals[:, None], shape)
    init = ttb.ktensor([f.copy() for f in start], np.ones(a.rank))
    t0, c0 = time.perf_counter(), time.process_time()
    m, _, out = ttb.cp_apr(sp, a.rank, init=init, maxiters=a.iters, printitn=0, kappa=a.kappa)
    t_py, c_py = time.perf_counter() - t0, time.process_time() - c0
    ll_py = log_likelihood(subs, vals, np.asarray(m.weights), [np.asarray(f) for f in m.factor_matrices])
    it_py = int(np.count_nonzero(out["nInnerIters"]))  # outer iterations run

    print(f"tenfold: {res.iterations} iterations, log-likelihood {ll_tf:.6f} (reported "
          f"{res.log_likelihood:.6f}), {t_tf / res.iterations:.4f} s/iteration wall, "
          f"{c_tf / res.iterations:.4f} CPU")
    print(f"pyttb:   {it_py} iterations, log-likelihood {ll_py:.6f}, "
          f"{t_py / it_py:.4f} s/iteration wall, {c_py / it_py:.4f} CPU")
    print(f"per iteration pyttb / tenfold: wall {(t_py / it_py) / (t_tf / res.iterations):.1f}x, "
          f"CPU {(c_py / it_py) / (c_tf / res.iterations):.1f}x; factor match score between "
          f"the two models: {tenfold_fms(res, m):.6f}")


def tenfold_fms(res, m):
    """Mean over components of the product of |cosines| after matching by weight order."""
    wa = np.asarray(res.weights)
    fa = [f / np.linalg.norm(f, axis=0) for f in res.factors]
    fb = [np.asarray(f) / np.linalg.norm(np.asarray(f), axis=0) for f in m.factor_matrices]
    wb = np.asarray(m.weights) * np.prod([np.linalg.norm(np.asarray(f), axis=0) for f in m.factor_matrices], axis=0)
    ob = np.argsort(-wb)
    return float(np.mean(np.prod([np.abs(np.sum(a[:, :] * b[:, ob], axis=0)) for a, b in zip(fa, fb)], axis=0)))


if __name__ == "__main__":
    main()
