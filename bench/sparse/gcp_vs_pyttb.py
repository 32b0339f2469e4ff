"""GCP of Tenfold against pyttb's gcp_opt on the same data and start.

    PYTHONPATH=<tenfold package> python bench/sparse/gcp_vs_pyttb.py [--shape 100,80,60]
        [--rank 5] [--iters 100] [--losses gaussian,poisson,...] [--sparse-shape 200,150,100]
        [--epochs 10] [--epoch-iters 1000] [--gradient-samples G] [--seed 0]

Dense part: for each loss, data drawn from a planted rank-R model (Gaussian noise;
Poisson counts of exp(m); Bernoulli bits of logistic(m); gamma (shape 4) and Rayleigh
amplitudes of mean m; Gaussian noise with 5% outliers for huber, threshold 0.25), one
start drawn as gcp_opt draws its own (uniform factors scaled to the data's norm, then
normalized: pyttb keeps the weights fixed and moves the unit-norm factors; Tenfold has
no weights, so it gets the same model with each weight spread over the factors as
lambda^(1/N)). Both run L-BFGS(-B) for at most --iters iterations (pyttb: scipy's
fmin_l_bfgs_b with gcp_opt's defaults; Tenfold: projected L-BFGS with gtol and ftol 0).
Printed: iterations, the objective of each final model (computed here by pyttb's own
loss functions on the full tensor, the same code for both), and seconds per iteration,
wall and CPU.

Sparse part: Bernoulli bits of log-odds -4 + 6 [in a block] (a sparse tensor), pyttb's
sptensor with Adam and its stratified sampler against tenfold.gcp on the coordinates,
the same sample counts (G nonzeros and G zeros per step; by default the Toolbox's
default, max(1000, 3 nnz / 1000)) and start, --epochs epochs of --epoch-iters steps; printed: the
exact objective of each final model (the tensor is small enough to form here) and
seconds per epoch. The two draw different samples (their own random streams).

Needs numpy and pyttb (pip install pyttb) and the tenfold package.
"""

import argparse
import logging
import time
from functools import partial

import numpy as np
import pyttb as ttb
from pyttb.gcp import handles
from pyttb.gcp.fg_setup import setup
from pyttb.gcp.optimizers import LBFGSB, Adam
from pyttb.gcp.samplers import GCPSampler, StratifiedCount

import tenfold

OBJECTIVES = {
    "gaussian": handles.Objectives.GAUSSIAN,
    "poisson": handles.Objectives.POISSON_LOG,
    "bernoulli": handles.Objectives.BERNOULLI_LOGIT,
    "gamma": handles.Objectives.GAMMA,
    "rayleigh": handles.Objectives.RAYLEIGH,
}
HUBER = 0.25


def handles_of(loss, data):
    """(function, gradient, lower bound) as gcp_opt sets them up."""
    if loss == "huber":
        return (partial(handles.huber, threshold=HUBER), partial(handles.huber_grad, threshold=HUBER),
                -np.inf)
    return setup(OBJECTIVES[loss], data)


def full(weights, factors):
    return np.einsum("r,ir,jr,kr->ijk", weights, *factors)


def planted(loss, shape, rank, rng):
    if loss in ("gamma", "rayleigh"):
        m = full(np.ones(rank), [rng.uniform(0.5, 1.5, (n, rank)) for n in shape])
    else:
        m = full(np.ones(rank), [rng.uniform(-1, 1, (n, rank)) for n in shape])
    if loss == "gaussian":
        return m + 0.1 * rng.standard_normal(shape)
    if loss == "huber":
        return m + np.where(rng.random(shape) < 0.05, 10.0, 0.05 * rng.standard_normal(shape))
    if loss == "poisson":
        return rng.poisson(np.exp(m)).astype(float)
    if loss == "bernoulli":
        return (rng.random(shape) < 1 / (1 + np.exp(-m))).astype(float)
    if loss == "gamma":
        return rng.gamma(4.0, m / 4.0)
    return m * np.sqrt(2 / np.pi) * np.sqrt(-2 * np.log(1 - rng.random(shape)))  # rayleigh


def pyttb_start(x_norm, shape, rank, rng):
    """gcp_opt's 'random' start: uniform factors, model scaled to the data's norm, normalized."""
    m0 = ttb.ktensor([rng.uniform(0, 1, (n, rank)) for n in shape])
    m0 *= x_norm / m0.norm()
    m0.normalize("all")
    return m0


def spread(m0):
    """The same model without weights: lambda^(1/N) on each factor."""
    w = np.asarray(m0.weights) ** (1.0 / m0.ndims)
    return [np.asarray(f) * w for f in m0.factor_matrices]


def timed(f):
    t0, c0 = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - t0, time.process_time() - c0


def dense(a, rng):
    shape = tuple(int(s) for s in a.shape.split(","))
    print(f"dense: shape {shape}, rank {a.rank}, at most {a.iters} iterations")
    print(f"{'loss':10} {'program':8} {'iters':>5} {'objective':>18} {'s/iter wall':>12} "
          f"{'s/iter CPU':>11}")
    for loss in a.losses.split(","):
        x = planted(loss, shape, a.rank, rng)
        fh, gh, lb = handles_of(loss, ttb.tensor(x))
        m0 = pyttb_start(np.linalg.norm(x), shape, a.rank, rng)
        start = spread(m0)

        def objective(weights, factors):
            return float(np.sum(fh(x, full(np.asarray(weights), [np.asarray(f) for f in factors]))))

        res, w_tf, c_tf = timed(lambda: tenfold.gcp(
            x, a.rank, loss=loss, n_iter_max=a.iters, init=start, gtol=0.0, ftol=0.0,
            huber_delta=HUBER))
        opt = LBFGSB(maxiter=a.iters)
        (m, _, info), w_py, c_py = timed(lambda: ttb.gcp_opt(
            ttb.tensor(x), a.rank, (fh, gh, lb), opt, init=m0.copy(), printitn=0))
        it_py = int(info["nit"])
        f_tf, f_py = objective(res.weights, res.factors), objective(m.weights, m.factor_matrices)
        for name, it, f, w, c in (("tenfold", res.iterations, f_tf, w_tf, c_tf),
                                  ("pyttb", it_py, f_py, w_py, c_py)):
            print(f"{loss:10} {name:8} {it:5d} {f:18.8g} {w / it:12.5f} {c / it:11.5f}")
        print(f"{loss:10} ratio pyttb/tenfold per iteration: wall {(w_py / it_py) / (w_tf / res.iterations):.1f}x, "
              f"CPU {(c_py / it_py) / (c_tf / res.iterations):.1f}x; objective tenfold/pyttb "
              f"{f_tf / f_py:.6f}")


def sparse(a, rng):
    shape = tuple(int(s) for s in a.sparse_shape.split(","))
    block = np.einsum("i,j,k->ijk", *(np.arange(n) < n // 4 for n in shape))
    m = -4.0 + 6.0 * block
    x = (rng.random(shape) < 1 / (1 + np.exp(-m))).astype(float)
    subs = np.argwhere(x > 0)
    vals = x[x > 0]
    nnz = len(vals)
    # The Toolbox's defaults for its default 1000 epochs, unless --gradient-samples.
    g = a.gradient_samples or max(1000, int(np.ceil(3 * nnz / 1000)))
    fsamp = max(int(np.ceil(nnz / 100)), 10**5)
    g, fsamp = min(g, nnz), min(fsamp, nnz)
    print(f"\nsparse bernoulli: shape {shape}, nnz {nnz}, rank {a.rank}, {a.epochs} epochs of "
          f"{a.epoch_iters} Adam steps, {g} + {g} gradient samples, {fsamp} + {fsamp} function samples")
    sp = ttb.sptensor(subs, vals[:, None], shape)
    m0 = pyttb_start(np.linalg.norm(vals), shape, a.rank, rng)
    start = spread(m0)
    fh = handles.bernoulli_logit

    def objective(weights, factors):
        return float(np.sum(fh(x, full(np.asarray(weights), [np.asarray(f) for f in factors]))))

    res, w_tf, c_tf = timed(lambda: tenfold.gcp(
        (subs.T.copy(), vals, shape), a.rank, loss="bernoulli", n_iter_max=a.epochs, init=start,
        epoch_iters=a.epoch_iters, rate=a.rate, gradient_samples=g, function_samples=fsamp,
        random_state=a.seed))
    np.random.seed(a.seed)  # pyttb samples with numpy's global generator
    sampler = GCPSampler(sp, gradient_samples=StratifiedCount(g, g),
                         function_samples=StratifiedCount(fsamp, fsamp), max_iters=a.epochs)
    opt = Adam(rate=a.rate, epoch_iters=a.epoch_iters, max_iters=a.epochs, printitn=0)
    (mp, _, info), w_py, c_py = timed(lambda: ttb.gcp_opt(
        sp, a.rank, handles.Objectives.BERNOULLI_LOGIT, opt, init=m0.copy(), sampler=sampler,
        printitn=0))
    ep_py = int(info["n_epoch"]) + 1
    f_tf, f_py = objective(res.weights, res.factors), objective(mp.weights, mp.factor_matrices)
    print(f"{'program':8} {'epochs':>6} {'objective':>18} {'s/epoch wall':>13} {'s/epoch CPU':>12}")
    for name, ep, f, w, c in (("tenfold", res.iterations, f_tf, w_tf, c_tf),
                              ("pyttb", ep_py, f_py, w_py, c_py)):
        print(f"{name:8} {ep:6d} {f:18.8g} {w / ep:13.4f} {c / ep:12.4f}")
    print(f"ratio pyttb/tenfold per epoch: wall {(w_py / ep_py) / (w_tf / res.iterations):.1f}x, "
          f"CPU {(c_py / ep_py) / (c_tf / res.iterations):.1f}x; objective tenfold/pyttb "
          f"{f_tf / f_py:.6f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="100,80,60")
    p.add_argument("--rank", type=int, default=5)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--losses", default="gaussian,poisson,bernoulli,gamma,rayleigh,huber")
    p.add_argument("--sparse-shape", default="200,150,100")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--epoch-iters", type=int, default=1000)
    p.add_argument("--rate", type=float, default=1e-3)
    p.add_argument("--gradient-samples", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip", choices=["dense", "sparse"], default=None)
    a = p.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # pyttb warns of every factor copy
    rng = np.random.default_rng(a.seed)
    if a.skip != "dense":
        dense(a, rng)
    if a.skip != "sparse":
        sparse(a, rng)


if __name__ == "__main__":
    main()
