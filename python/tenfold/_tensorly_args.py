"""TensorLy's arguments in the direct API (``tenfold.parafac`` and
``tenfold.non_negative_parafac_hals``): TensorLy's meaning for its options, its random
start from a NumPy generator, its callback and its error history. The patch of
``tensorly.decomposition`` (tenfold.tensorly) runs through the same `run_cp`."""

import inspect
import warnings

import numpy as np

from ._results import CpProgress


def _line_search_iteration(iteration, linesearch):
    """Whether 1-based `iteration` tries Bro's jump (TensorLy records no error for it)."""
    return bool(linesearch) and iteration > 6 and (iteration - 1) % 2 == 0


def _is_generator(random_state):
    return isinstance(random_state, (np.random.RandomState, np.random.Generator))


def _random_start(rng, shape, rank, dtype):
    """TensorLy's random start: uniform [0, 1) factors drawn axis by axis from `rng`."""
    draw = rng.random_sample if isinstance(rng, np.random.RandomState) else rng.random
    return None, [np.asarray(draw((s, rank)), dtype=dtype) for s in shape]


def _takes_model(callback):
    """Whether `callback` has TensorLy's signature (cp_tensor, rec_error)."""
    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def fixed_axes(fixed_modes, ndim):
    """TensorLy's fixed_modes as a sorted tuple of axes; the last axis is dropped with
    TensorLy's warning (its factor carries the error computation there)."""
    if fixed_modes is None:
        return ()
    axes = []
    for m in fixed_modes:
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, np.integer)):
            raise TypeError(f"fixed_modes must hold axis numbers, got {m!r}")
        if not -ndim <= m < ndim:
            raise ValueError(f"fixed_modes: axis {m} is out of range for a tensor with {ndim} axes")
        axes.append(int(m) % ndim)
    if ndim - 1 in axes:
        warnings.warn("You asked for fixing the last mode, which is not supported.\n The last "
                      "mode will not be fixed. Consider using tl.moveaxis()")
        axes = [a for a in axes if a != ndim - 1]
    return tuple(sorted(set(axes)))


_SVD_NAMES = ("truncated_svd", "symeig_svd", "randomized_svd")


def orthogonalised_sweeps(orthogonalise, n_iter_max):
    """TensorLy's orthogonalise as a count of sweeps that start with the QR of the factors:
    TensorLy orthogonalises at its 0-based iterations 0..k for an int k (True is 1), and at
    every iteration for any other true value."""
    if not orthogonalise:
        return 0
    k = orthogonalise if isinstance(orthogonalise, int) else n_iter_max
    return max(0, min(k + 1, n_iter_max))


def sparse_entries(sparsity, shape):
    """TensorLy's sparsity as a count of entries: a float is a fraction of the tensor's
    (rounded down), anything else a count; a false value (or a count of 0) is none."""
    if not sparsity:
        return 0
    if isinstance(sparsity, float):
        return int(sparsity * np.prod(shape))
    return int(sparsity)


def _full(weights, factors):
    """The dense tensor of a CP model (NumPy axis order)."""
    letters = "abcdefghijklmnopqrstuvwxy"[:len(factors)]
    return np.einsum(",".join(a + "z" for a in letters) + ",z->" + letters, *factors, weights)


def sparsify(residual, count):
    """TensorLy's sparsify_tensor: the entries of `residual` at least as large in magnitude
    as its count-th largest (all of it when count >= its size), zeros elsewhere."""
    if count >= residual.size:
        return residual
    bound = np.sort(np.abs(residual), axis=None)[-count]
    return np.where(np.abs(residual) < bound, np.zeros_like(residual), residual)


def _refuse(extra, nonnegative):
    """ValueError for TensorLy arguments that need an algorithm Tenfold does not have."""
    if extra.get("svd", "truncated_svd") not in _SVD_NAMES:
        raise ValueError(f"svd must be one of {', '.join(_SVD_NAMES)}, got {extra['svd']!r}")
    if extra.get("cvg_criterion", "abs_rec_error") not in ("abs_rec_error", "rec_error"):
        raise ValueError("cvg_criterion must be 'abs_rec_error' or 'rec_error', got "
                         f"{extra['cvg_criterion']!r}")
    if nonnegative:
        if extra.get("sparsity_coefficients") is not None:
            raise ValueError("sparsity_coefficients are not supported by Tenfold's HALS")
        if extra.get("exact"):
            raise ValueError("exact=True (HALS inner iterations to 1e-16) is not supported by "
                             "Tenfold's HALS")


def nonnegative_axes(nn_modes, ndim):
    """TensorLy's nn_modes as a sorted tuple of axes: 'all', None (none) or axis numbers
    (TensorLy tests membership, so a number outside 0..ndim-1 would constrain nothing:
    ValueError here)."""
    if isinstance(nn_modes, str):
        if nn_modes != "all":
            raise ValueError(f"nn_modes must be 'all', None or axis numbers, got {nn_modes!r}")
        return tuple(range(ndim))
    if nn_modes is None:
        return ()
    axes = set()
    for m in nn_modes:
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, np.integer)):
            raise TypeError(f"nn_modes must hold axis numbers, got {m!r}")
        if not 0 <= m < ndim:
            raise ValueError(f"nn_modes: {m} is not an axis of a tensor with {ndim} axes")
        axes.add(int(m))
    return tuple(sorted(axes))


def run_cp(cp, tensor, rank, n_iter_max, init, tol, random_state, normalize_factors, callback,
           backend, dtype, native, extra, start_callback=None, wrap=tuple):
    """parafac / non_negative_parafac_hals with TensorLy's arguments `extra` over `cp`
    (tenfold._cp). `start_callback` (the patch) has seen the start already; `wrap` makes the
    model a TensorLy-style callback sees."""
    nonnegative = native["nonnegative"]
    _refuse(extra, nonnegative)
    ndim = np.ndim(tensor)
    # Non-negative axes (TensorLy's nn_modes): all of them, some (the others take the plain
    # update), or none (plain ALS).
    nn_axes = nonnegative_axes(extra.get("nn_modes", "all"), ndim) if nonnegative else ()
    constrained = nonnegative and bool(nn_axes)
    if len(nn_axes) == ndim:
        nn_axes = ()
    fixed = fixed_axes(extra.get("fixed_modes"), ndim)
    if _is_generator(random_state):
        if isinstance(init, str) and init == "random":
            init = _random_start(random_state, np.shape(tensor), int(rank),
                                 np.result_type(np.asarray(tensor).dtype, np.float32))
        random_state = None
    if fixed and isinstance(init, str):
        raise ValueError("fixed_modes need a start to keep: pass init=(weights, factors)")
    if fixed and init[0] is not None:
        init = fold_weights(np.asarray(init[0]), [np.asarray(f) for f in init[1]], fixed)

    cvg = extra.get("cvg_criterion", "abs_rec_error")
    verbose = extra.get("verbose", 0)
    linesearch = native["linesearch"]
    tensorly_callback = callback is not None and _takes_model(callback)
    card = sparse_entries(extra.get("sparsity"), np.shape(tensor))
    # TensorLy's stopping rule in Python where it differs from Tenfold's |change| < tol:
    # the signed decrease, or a start_callback run (the patch) that records errors as TensorLy.
    own_rule = cvg == "rec_error" or start_callback is not None
    errors = []  # TensorLy's error history: none for line-search iterations
    stopped = []

    def hook(iteration, fit, delta, seconds, model=None):
        if not _line_search_iteration(iteration, linesearch):
            errors.append(np.float64(1.0 - fit))
        if verbose:
            print(f"iteration {iteration}, reconstruction error: {errors[-1]}")
        if callback is not None:
            if tensorly_callback:
                weights, factors = model
                x_dtype = np.result_type(np.asarray(tensor).dtype, np.float32)
                weights, factors = weights.astype(x_dtype), [f.astype(x_dtype) for f in factors]
                cp_model = wrap((weights, factors))
                if card:  # TensorLy's robust CP: the model and the sparse component
                    cp_model = (cp_model, sparsify(
                        np.asarray(tensor, dtype=x_dtype) - _full(weights, factors), card))
                if callback(cp_model, errors[-1]) is True:
                    return True
            elif callback(CpProgress(iteration, fit, delta, seconds)):
                return True
        if own_rule and tol and len(errors) >= 2 and iteration >= 2:
            decrease = errors[-2] - errors[-1]
            if (abs(decrease) if cvg == "abs_rec_error" else decrease) < tol:
                stopped.append(iteration)
                return True
        return False

    use_hook = callback is not None or verbose or own_rule or extra.get("return_errors")
    orthogonalise = extra.get("orthogonalise", False)
    res = cp(tensor, rank, n_iter_max, init, 0.0 if own_rule else tol, random_state,
             normalize_factors, hook if use_hook else None, backend, dtype,
             native["linesearch"], native["l2_reg"], native["mask"], native["n_starts"],
             native["compress"], constrained, fixed, tensorly_callback,
             orthogonalised_sweeps(orthogonalise, n_iter_max)
             if isinstance(n_iter_max, (int, np.integer)) else 0,
             native.get("linesearch_rule", "tenfold"), card, nn_axes,
             native.get("solver", "exact"), native.get("samples", 0),
             native.get("fit_check_every", 0))
    if stopped:
        res.stop, res.converged = "converged", True
    out = res
    if card:  # TensorLy returns the model and the sparse component of its residual
        out = (res, sparsify(np.asarray(tensor, dtype=res.weights.dtype) - _full(*res), card))
    if extra.get("return_errors"):
        if not use_hook:
            errors = [np.float64(1.0 - f) for i, f in enumerate(res.fit_history, 1)
                      if not _line_search_iteration(i, linesearch)]
        return out, errors
    return out


def fold_weights(weights, factors, fixed):
    """(None, factors) with non-unit weights pulled into the first axis that is not fixed.

    ALS never reads the start of the first factor it updates, so the weights reach no
    normal matrix there: a start whose weights span many orders of magnitude (TensorLy's
    SVD start at a rank above the tensor's has weights near 1e-16) would otherwise make
    the first normal matrices singular to working precision (condition ~ (max/min)^2),
    and the run would follow their rounding (a Cholesky failure, a truncated
    pseudo-inverse) instead of the start."""
    if weights is None or np.all(weights == 1):
        return None, factors
    factors = list(factors)
    axis = min(a for a in range(len(factors)) if a not in fixed)
    factors[axis] = factors[axis] * weights
    return None, factors
