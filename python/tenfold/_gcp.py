"""Generalized CP (other losses than least squares) of dense arrays and sparse tensors."""

import numpy as np

from . import _validate
from ._arrays import as_float_array, mask_like
from ._results import GcpResult
from .sparse import as_coo, is_sparse

__all__ = ["gcp", "GcpResult"]


# What each loss needs of the data (the library's gcp_value_requirement, in NumPy terms).
_NEEDS = {
    "poisson": (lambda v: v < 0, "nonnegative counts"),
    "bernoulli": (lambda v: (v != 0) & (v != 1), "binary data (0 or 1)"),
    "gamma": (lambda v: v < 0, "nonnegative data"),
    "rayleigh": (lambda v: v < 0, "nonnegative data"),
}


def gcp(tensor, rank, loss="gaussian", n_iter_max=1000, random_state=None, callback=None,
        dtype=None, *, init=None, gtol=1e-6, ftol=1e-10, memory=5, mask=None,
        huber_delta=0.25, epoch_iters=1000, rate=1e-3, gradient_samples=0,
        function_samples=0):
    """Generalized CP (Hong, Kolda and Duersch 2020): of a dense array by L-BFGS, of a
    sparse tensor by stochastic gradients on sampled nonzeros and zeros (Adam).

    Parameters
    ----------
    tensor : array_like or sparse, at least 2 axes
        A dense array, or a ``(coords, values, shape)`` tuple / ``sparse.COO`` (never
        made dense: the objective and gradient are estimated from stratified samples,
        as the Tensor Toolbox's ``gcp_opt`` does).
    rank : int
    loss : {'gaussian', 'poisson', 'bernoulli', 'gamma', 'rayleigh', 'huber'}
        (x - m)^2; exp(m) - x m for counts (log link; x >= 0); log(1 + exp(m)) - x m
        for binary data (logit link; x in {0, 1}); x / m + log m (gamma) and
        2 log m + (pi / 4) (x / m)^2 (rayleigh) for nonnegative data, with nonnegative
        factors; huber: (x - m)^2 within `huber_delta` of x, linear beyond.
    n_iter_max : int
        Most L-BFGS iterations (sparse: epochs).
    random_state : int or None
        Seed of the random start (and of the samples).
    callback : callable, optional
        ``callback(iteration, objective, gradient_norm, seconds)``; True stops the run.
    init : sequence of arrays, optional
        The start: one (I_n, rank) factor per axis.
    gtol, ftol, memory : stopping tolerances (projected gradient norm relative to the
        start's; objective change relative to 1 + |objective|) and L-BFGS pairs kept.
    mask : array_like of bool, optional (dense only)
        True where an entry is observed; the others (NaN allowed) are left out.
    huber_delta : float
        The huber loss's threshold.
    epoch_iters, rate, gradient_samples, function_samples : sparse only
        Adam steps per epoch and their step; nonzeros and zeros sampled per step and for
        the objective's estimate, each (0: the Toolbox's defaults).

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
    from . import _tenfold

    rank = _validate.integer(rank, "rank", 1)
    n_iter_max = _validate.integer(n_iter_max, "n_iter_max", 1, _validate.INT_MAX)
    huber_delta = _validate.number(huber_delta, "huber_delta")
    progress = None
    if callback is not None:
        def progress(iteration, objective, gradient_norm, seconds):
            return bool(callback(iteration, objective, gradient_norm, seconds))
    if is_sparse(tensor):
        if mask is not None:
            raise ValueError("mask does not apply to a sparse tensor (its absent entries are zeros)")
        coords, values, shape = as_coo(tensor, dtype)
        _check_data(values, loss, lambda k: f"coordinates {[int(c) for c in coords[:, k]]}")
        given = [] if init is None else [np.asarray(f, dtype=values.dtype) for f in init]
        r = _tenfold.sparse_gcp(coords, values, shape, rank, str(loss), huber_delta, n_iter_max,
                                _validate.random_seed(random_state), given, progress,
                                _validate.integer(epoch_iters, "epoch_iters", 1, _validate.INT_MAX),
                                _validate.number(rate, "rate"),
                                _validate.integer(gradient_samples, "gradient_samples", 0),
                                _validate.integer(function_samples, "function_samples", 0))
    else:
        x = as_float_array(tensor, "tensor", dtype)
        m = None if mask is None else mask_like(mask, x)
        observed = ~np.isnan(x) if m is None else (m != 0) & ~np.isnan(x)
        _check_data(np.where(observed, x, 0), loss,
                    lambda k: f"NumPy index {[int(i) for i in np.unravel_index(k, x.shape)]}")
        given = [] if init is None else [np.asarray(f, dtype=x.dtype) for f in init]
        r = _tenfold.gcp(x, rank, str(loss), huber_delta, m, n_iter_max,
                         _validate.nonnegative(gtol, "gtol"), _validate.nonnegative(ftol, "ftol"),
                         _validate.integer(memory, "memory", 1, _validate.INT_MAX),
                         _validate.random_seed(random_state), given, progress)
    weights, factors = r.pop("weights"), r.pop("factors")
    return GcpResult(weights, factors, **r)


def _check_data(values, loss, where):
    """ValueError naming the first value the loss cannot model (where(k): its place)."""
    need = _NEEDS.get(loss)
    if need is None:
        return
    bad = np.flatnonzero(need[0](np.ravel(values)))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"gcp with loss={loss!r} needs {need[1]}; the entry at {where(k)} is "
                         f"{np.ravel(values)[k]:g}")
