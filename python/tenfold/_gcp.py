"""Generalized CP (other losses than least squares) of dense arrays."""

import numpy as np

from .sparse import CpAprResult as _TwoPartResult
from .sparse import is_sparse as _is_sparse

__all__ = ["gcp", "GcpResult"]


class GcpResult(_TwoPartResult):
    """A GCP model that unpacks as ``(weights, factors)``, on the link scale (poisson:
    log-rates, bernoulli: log-odds). Attributes: weights, factors (NumPy axis order),
    iterations, converged, stop, objective, objective_history, seconds."""

    def __repr__(self):
        return (
            f"GcpResult(rank={len(self[0])}, objective={self.objective:.6g}, "
            f"iterations={self.iterations}, converged={self.converged})"
        )


def gcp(tensor, rank, loss="gaussian", n_iter_max=1000, random_state=None, callback=None,
        dtype=None, *, init=None, gtol=1e-6, ftol=1e-10, memory=5):
    """Generalized CP (Hong, Kolda and Duersch 2020) of a dense array by L-BFGS.

    Parameters
    ----------
    tensor : array_like, at least 2 axes (dense)
    rank : int
    loss : {'gaussian', 'poisson', 'bernoulli'}
        (x - m)^2; exp(m) - x m for counts (log link; x >= 0); log(1 + exp(m)) - x m
        for binary data (logit link; x in {0, 1}).
    n_iter_max : int
        Most L-BFGS iterations.
    random_state : int or None
        Seed of the random start.
    callback : callable, optional
        ``callback(iteration, objective, gradient_norm, seconds)``; True stops the run.
    init : sequence of arrays, optional
        The start: one (I_n, rank) factor per axis.
    gtol, ftol, memory : stopping tolerances (gradient norm relative to the start's;
        objective change relative to 1 + |objective|) and L-BFGS pairs kept.

    Returns
    -------
    GcpResult

    Examples
    --------
    >>> import numpy as np, tenfold
    >>> bits = (np.random.default_rng(0).random((12, 10, 8)) < 0.3).astype(float)
    >>> res = tenfold.gcp(bits, 2, loss="bernoulli", random_state=1)
    >>> [f.shape for f in res.factors], bool(res.objective < bits.size * np.log(2))
    ([(12, 2), (10, 2), (8, 2)], True)
    """
    from . import _seed, _tenfold
    from ._arrays import as_float_array

    if _is_sparse(tensor):
        raise ValueError("gcp takes dense arrays only (sparse GCP, with sampled zeros, is not "
                         "available yet)")
    x = as_float_array(tensor, "tensor", dtype)
    # The data the loss cannot model, named by its NumPy index (NaN is the library's to name).
    bad = {"poisson": (x < 0, "nonnegative counts"),
           "bernoulli": ((x != 0) & (x != 1) & ~np.isnan(x), "binary data (0 or 1)")}.get(loss)
    if bad is not None and bad[0].any():
        at = tuple(int(i) for i in np.argwhere(bad[0])[0])
        raise ValueError(f"gcp with loss={loss!r} needs {bad[1]}; the entry at NumPy index "
                         f"{list(at)} is {x[at]:g}")
    given = [] if init is None else [np.asarray(f, dtype=x.dtype) for f in init]
    progress = None
    if callback is not None:
        def progress(iteration, objective, gradient_norm, seconds):
            return bool(callback(iteration, objective, gradient_norm, seconds))
    r = _tenfold.gcp(x, int(rank), str(loss), int(n_iter_max), float(gtol), float(ftol),
                     int(memory), _seed(random_state), given, progress)
    weights, factors = r.pop("weights"), r.pop("factors")
    return GcpResult(weights, factors, **r)
