"""The patch of ``tensorly.decomposition`` (tenfold.tensorly) for tensor_train,
non_negative_tucker and non_negative_tucker_hals: wrappers with TensorLy's signatures that
run Tenfold where it computes what TensorLy would, and TensorLy's original otherwise
(the counting and fallback rules are tenfold.tensorly's, handed in by `wrappers`)."""

import numpy as np

from ._tt_nntucker import _no_penalty, _print_errors
from ._tt_nntucker import non_negative_tucker as _direct_mu
from ._tt_nntucker import non_negative_tucker_hals as _direct_hals
from ._tt_nntucker import tensor_train as _direct_tensor_train

HOMES = {
    "tensor_train": "tensorly.decomposition._tt",
    "non_negative_tucker": "tensorly.decomposition._tucker",
    "non_negative_tucker_hals": "tensorly.decomposition._tucker",
}

# TensorLy's SVD functions whose vectors Tenfold's Gram eigenvectors are (to rounding).
_DETERMINISTIC_SVDS = ("truncated_svd", "symeig_svd")

_HOOKS = {}  # serve, tensor_reason and originals, from tenfold.tensorly


def wrappers(serve, tensor_reason, originals):
    """name -> wrapper; `serve(name, reason, original, args, native)` runs native() or, with a
    reason (or when Tenfold refuses), TensorLy's original, and counts the call."""
    _HOOKS.update(serve=serve, tensor_reason=tensor_reason, originals=originals)
    return {"tensor_train": tensor_train, "non_negative_tucker": non_negative_tucker,
            "non_negative_tucker_hals": non_negative_tucker_hals}


def tensor_train(input_tensor, rank, svd="truncated_svd", verbose=False, random_state=None):
    args = dict(locals())
    reason = _HOOKS["tensor_reason"](input_tensor)
    if reason is None and not (isinstance(svd, str) and svd in _DETERMINISTIC_SVDS):
        reason = f"svd {svd if isinstance(svd, str) else type(svd).__name__}"

    def native():
        import tensorly as tl
        from tensorly.tt_tensor import TTTensor, validate_tt_rank

        # TensorLy's reading of rank: an int, N + 1 ints, 'same' or a float.
        ranks = validate_tt_rank(tl.shape(input_tensor), rank=rank)
        res = _direct_tensor_train(input_tensor, rank=list(ranks))
        if verbose is True:
            for k, g in enumerate(res):
                print(f"TT factor {k} computed with shape {g.shape}")
        return TTTensor([np.asarray(g) for g in res])

    return _serve("tensor_train", reason, args, native)


def non_negative_tucker(tensor, rank, n_iter_max=10, init="svd", tol=10e-5,
                        random_state=None, verbose=False, return_errors=False,
                        normalize_factors=False):
    args = dict(locals())
    reason = _HOOKS["tensor_reason"](tensor) or _iterations_reason(n_iter_max)
    if reason is None and (isinstance(tol, (bool, np.bool_)) or
                           not isinstance(tol, (int, float, np.integer, np.floating))):
        reason = "tol type"  # TensorLy compares it with the change of error

    def native():
        core, factors = _start(tensor, rank, init, "truncated_svd", random_state)
        res, errors = _direct_mu(tensor, core.shape, n_iter_max, (core, factors), tol,
                                 normalize_factors=normalize_factors, return_errors=True)
        return _tensorly_result(res, errors, verbose, return_errors)

    return _serve("non_negative_tucker", reason, args, native)


def non_negative_tucker_hals(tensor, rank, n_iter_max=100, init="svd", svd="truncated_svd",
                             tol=1e-8, sparsity_coefficients=None,
                             core_sparsity_coefficient=None, fixed_modes=None,
                             random_state=None, verbose=False, normalize_factors=False,
                             return_errors=False, exact=False, algorithm="fista"):
    args = dict(locals())
    reason = _HOOKS["tensor_reason"](tensor) or _iterations_reason(n_iter_max)
    if reason is None:
        if not (_no_penalty(sparsity_coefficients) and _no_penalty(core_sparsity_coefficient)):
            reason = "sparsity coefficients"
        elif fixed_modes:
            reason = "fixed_modes"
        elif exact:
            reason = "exact"
        elif algorithm not in ("fista", "active_set"):
            reason = f"algorithm {algorithm}"

    def native():
        core, factors = _start(tensor, rank, init, svd, random_state)
        res, errors = _direct_hals(tensor, core.shape, n_iter_max, (core, factors),
                                   tol=tol, normalize_factors=normalize_factors,
                                   return_errors=True, algorithm=algorithm)
        return _tensorly_result(res, errors, verbose, return_errors)

    return _serve("non_negative_tucker_hals", reason, args, native)


def _serve(name, reason, args, native):
    return _HOOKS["serve"](name, reason, _HOOKS["originals"][name], args, native)


def _iterations_reason(n_iter_max):
    if isinstance(n_iter_max, (bool, np.bool_)) or not isinstance(n_iter_max, (int, np.integer)):
        return "n_iter_max type"
    return "n_iter_max < 0" if n_iter_max < 0 else None


def _start(tensor, rank, init, svd, random_state):
    """TensorLy's non-negative start (its initialize_tucker: NNDSVD for 'svd', its draws for
    'random', absolute values of a given one), as NumPy arrays."""
    import tensorly as tl
    from tensorly.decomposition._tucker import initialize_tucker
    from tensorly.tucker_tensor import validate_tucker_rank

    ranks = validate_tucker_rank(tl.shape(tensor), rank=rank)
    core, factors = initialize_tucker(tensor, ranks, range(tl.ndim(tensor)), init=init, svd=svd,
                                      random_state=random_state, non_negative=True)
    return np.asarray(core), [np.asarray(f) for f in factors]


def _tensorly_result(res, errors, verbose, return_errors):
    """TensorLy's return value (a TuckerTensor, with the errors on request) and its output."""
    from tensorly.tucker_tensor import TuckerTensor

    if verbose:
        _print_errors(errors, res.converged)
    out = TuckerTensor((res.core, list(res.factors)))
    return (out, errors) if return_errors else out
