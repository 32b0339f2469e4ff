"""TensorLy's semantics over Tenfold, and a one-line patch of ``tensorly.decomposition``.

    import tenfold.tensorly
    tenfold.tensorly.patch()      # tensorly.decomposition.parafac & co. now run Tenfold
    tenfold.tensorly.calls()      # {'native': n, 'fallback': m, 'reasons': {...}}
    tenfold.tensorly.unpatch()

A patched call runs natively only when Tenfold computes what TensorLy would from the same
start (TensorLy's own start, TensorLy's stopping rule and error history); any other call
(an argument, backend or dtype Tenfold does not serve) runs TensorLy's original function,
and `calls` says why. TensorLy is imported only by `patch`; ``import tenfold`` does not
import this module.
"""

import collections
import operator
import sys
import threading
import warnings

import numpy as np

from . import _cp, _tensorly_parafac2, _tensorly_tt, _validate
from . import tucker as _direct_tucker
from ._tensorly_args import (fixed_axes, fold_weights, nonnegative_axes, run_cp, sparse_entries,
                             sparsify)

__all__ = ["patch", "unpatch", "patched", "calls", "reset_calls"]

_lock = threading.Lock()
_originals = {}  # name -> TensorLy's function
_replaced = []  # (module, attribute, original) for unpatch
_counts = {"native": collections.Counter(), "fallback": collections.Counter()}

_HOMES = {
    "parafac": "tensorly.decomposition._cp",
    "non_negative_parafac_hals": "tensorly.decomposition._nn_cp",
    "tucker": "tensorly.decomposition._tucker",
}


def calls():
    """Calls that reached a patched function since the last reset: how many Tenfold served
    natively, how many fell back to TensorLy, and why (reason -> count)."""
    with _lock:
        native = sum(_counts["native"].values())
        fallback = sum(_counts["fallback"].values())
        return {
            "native": native,
            "fallback": fallback,
            "native_by_function": dict(_counts["native"]),
            "reasons": dict(_counts["fallback"]),
        }


def reset_calls():
    with _lock:
        _counts["native"].clear()
        _counts["fallback"].clear()


def patched():
    """Whether patch() is in effect."""
    return bool(_originals)


def _record(name, reason=None):
    with _lock:
        if reason is None:
            _counts["native"][name] += 1
        else:
            _counts["fallback"][f"{name}: {reason}"] += 1


def _tensor_reason(tensor, complex_ok=False):
    """Why Tenfold cannot take this tensor as TensorLy holds it, or None (complex64 and
    complex128 only with `complex_ok`: CP-ALS)."""
    import tensorly as tl

    if tl.get_backend() != "numpy":
        return f"backend {tl.get_backend()}"
    if not isinstance(tensor, np.ndarray):
        return f"tensor type {type(tensor).__name__}"
    if tensor.dtype not in (np.float32, np.float64) + ((np.complex64, np.complex128)
                                                       if complex_ok else ()):
        return f"dtype {tensor.dtype}"
    if tensor.ndim < 2:
        return "tensor of order < 2"
    if not np.all(np.isfinite(tensor)):
        return "non-finite entries"
    return None


def _start_only(tensor, n_iter_max, fixed_modes):
    """Whether TensorLy's parafac returns its start (no sweep, or every mode fixed)."""
    return n_iter_max == 0 or _every_mode_fixed(tensor, fixed_modes)


def _every_mode_fixed(tensor, fixed_modes):
    """TensorLy's test for returning its start unchanged: fixed_modes == [0, ..., N-1]."""
    return fixed_modes is not None and list(fixed_modes) == list(range(np.ndim(tensor)))


def _cp_reason(tensor, n_iter_max, init, orthogonalise, sparsity, l2_reg, mask, linesearch,
               cvg_criterion, fixed_modes, complex_ok=True):
    reason = _tensor_reason(tensor, complex_ok)
    if reason:
        return reason
    if isinstance(n_iter_max, (bool, np.bool_)) or not isinstance(n_iter_max, (int, np.integer)):
        return "n_iter_max type"
    if n_iter_max < 0:
        return "n_iter_max < 0"
    if not (isinstance(init, str) or isinstance(init, (tuple, list))
            or type(init).__name__ == "CPTensor"):
        return "init type"
    if _start_only(tensor, n_iter_max, fixed_modes):
        if sparsity:
            return "sparsity with TensorLy's start as the answer"
        return None  # TensorLy's start is the answer, mask or not
    if orthogonalise and fixed_modes:
        return "orthogonalise with fixed_modes (TensorLy's QR changes the fixed factors)"
    if mask is not None:
        return "mask (TensorLy imputes the missing entries only after the first sweep)"
    if l2_reg:
        return "l2_reg (TensorLy regularises the unnormalised factors)"
    if cvg_criterion not in ("abs_rec_error", "rec_error"):
        return "cvg_criterion"
    return None


def _gram_svd_factors(tensor, rank, rng):
    """TensorLy's truncated-SVD start (left singular vectors of each unfolding, signs by
    svd_flip, the first scaled by the singular values, random columns past I_n drawn from
    `rng` as TensorLy draws them) from the eigenvectors of each unfolding's Gram X_(n) X_(n)^H
    (float64 or complex128),
    at a fraction of the SVD's cost; None where a kept singular value is within sqrt(eps)
    of its neighbours or of zero in relative terms, where the vectors are not determined to
    TensorLy's tolerances (TensorLy's own SVD then runs)."""
    import tensorly as tl

    if tensor.dtype not in (np.float64, np.complex128):
        return None
    gap = np.sqrt(np.finfo(np.float64).eps)
    factors = []
    for mode in range(tensor.ndim):
        m = tl.unfold(tensor, mode)
        if m.shape[0] > m.shape[1]:
            return None
        k = min(rank, m.shape[0])
        # X_(n) = U S V^H  =>  X_(n) X_(n)^H = U S^2 U^H (eigenvalues ascending from eigh)
        lam, vec = np.linalg.eigh(m @ m.conj().T)
        lam, vec = lam[::-1], vec[:, ::-1]
        kept = np.append(lam[:k], lam[k] if k < len(lam) else 0.0)
        if not np.all(-np.diff(kept) > gap * lam[0]):
            return None
        u = vec[:, :k]
        # svd_flip: the largest |entry| of each column real and positive (its phase
        # sign(z) = z / |z| divided out; conj(sign) = sign for real entries)
        u = u * np.conj(np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(k)]))
        if mode == 0:
            u = u * np.sqrt(lam[:k])
        if m.shape[0] < rank:
            u = np.concatenate([u, rng.random_sample((m.shape[0], rank - m.shape[0]))], axis=1)
        factors.append(u)
    return factors


def _start(tensor, rank, init, svd, random_state, normalize_factors, non_negative=False):
    """TensorLy's start (it draws from random_state exactly as TensorLy's parafac would)."""
    import tensorly as tl
    from tensorly.cp_tensor import CPTensor, cp_normalize
    from tensorly.decomposition._cp import initialize_cp

    # (non_negative: TensorLy's SVD start is NNDSVD of each unfolding, from its own SVD)
    if isinstance(init, str) and init == "svd" and svd == "truncated_svd" and not non_negative:
        rng = tl.check_random_state(random_state)
        state = rng.get_state()
        factors = _gram_svd_factors(tensor, rank, rng)
        if factors is not None:
            kt = CPTensor((None, factors))
            weights, factors = cp_normalize(kt) if normalize_factors else kt
            return (None if weights is None else np.asarray(weights)), list(factors)
        rng.set_state(state)
        random_state = rng
    weights, factors = initialize_cp(tensor, rank, init=init, svd=svd, random_state=random_state,
                                     normalize_factors=normalize_factors,
                                     non_negative=non_negative)
    factors = [np.asarray(f) for f in factors]
    return (None if weights is None else np.asarray(weights)), factors



def _relative_error(tensor, weights, factors, mask=None):
    """TensorLy's error of a model; with a mask, over the tensor imputed from the model."""
    import tensorly as tl

    model = tl.cp_to_tensor((weights, factors))
    if mask is not None:
        tensor = tensor * mask + model * (1 - mask)
    return tl.norm(tensor - model, 2) / tl.norm(tensor, 2)


def _serve(name, reason, original, args, native):
    if reason is None:
        try:
            out = native()
        except (ValueError, ArithmeticError) as e:
            # Tenfold refused the call (e.g. a start it cannot move): TensorLy decides.
            reason = f"tenfold refused: {str(e).splitlines()[0][:80]}"
        else:
            _record(name)
            return out
    _record(name, reason)
    return original(**args)


def _parafac(tensor, rank, n_iter_max=100, init="svd", svd="truncated_svd",
             normalize_factors=False, orthogonalise=False, tol=1e-8, random_state=None,
             verbose=0, return_errors=False, sparsity=None, l2_reg=0, mask=None,
             cvg_criterion="abs_rec_error", fixed_modes=None, svd_mask_repeats=5,
             linesearch=False, callback=None):
    args = dict(locals())
    reason = _cp_reason(tensor, n_iter_max, init, orthogonalise, sparsity, l2_reg, mask,
                        linesearch, cvg_criterion, fixed_modes)

    def native():
        if _start_only(tensor, n_iter_max, fixed_modes):
            return _native_start(args)
        return _native_cp(args, nonnegative=False)

    return _serve("parafac", reason, _originals["parafac"], args, native)


def _native_start(a):
    """parafac with n_iter_max=0 or every mode fixed: TensorLy's start (its initialize_cp,
    with the mask's imputation) as TensorLy returns it, callback and error list included."""
    import tensorly as tl
    from tensorly.cp_tensor import CPTensor, validate_cp_rank
    from tensorly.decomposition._cp import initialize_cp

    tensor = a["tensor"]
    rank = validate_cp_rank(tl.shape(tensor), rank=a["rank"])
    weights, factors = initialize_cp(tensor, rank, init=a["init"], svd=a["svd"],
                                     random_state=a["random_state"],
                                     normalize_factors=a["normalize_factors"], mask=a["mask"],
                                     svd_mask_repeats=a["svd_mask_repeats"])
    fixed = a["fixed_modes"]
    for mode in fixed or ():
        if mode != tensor.ndim - 1 and factors[mode].shape[0] != tensor.shape[mode]:
            raise ValueError(f"fixed mode {mode}: the start factor has {factors[mode].shape[0]} "
                             f"rows, the tensor {tensor.shape[mode]}")
    out = CPTensor((weights, factors))
    if _every_mode_fixed(tensor, fixed):
        return out  # TensorLy returns here, before its callback and without errors
    if a["callback"] is not None:
        a["callback"](out, _relative_error(tensor, weights, factors, a["mask"]))
    return (out, []) if a["return_errors"] else out


def _non_negative_parafac_hals(tensor, rank, n_iter_max=100, init="svd", svd="truncated_svd",
                               tol=10e-8, random_state=None, sparsity_coefficients=None,
                               fixed_modes=None, nn_modes="all", exact=False,
                               normalize_factors=False, verbose=False, return_errors=False,
                               cvg_criterion="abs_rec_error"):
    args = dict(locals())
    reason = _cp_reason(tensor, n_iter_max, init, False, None, 0, None, False, cvg_criterion,
                        fixed_modes, complex_ok=False)
    if reason is None:
        if sparsity_coefficients is not None:
            reason = "sparsity_coefficients"
        elif exact:
            reason = "exact"
        else:
            try:
                nonnegative_axes(nn_modes, tensor.ndim)
            except (TypeError, ValueError):
                reason = "nn_modes other than 'all', None or axes"

    def native():
        return _native_cp(args, nonnegative=True)

    return _serve("non_negative_parafac_hals", reason, _originals["non_negative_parafac_hals"],
                  args, native)


def _native_cp(a, nonnegative):
    import tensorly as tl
    from tensorly.cp_tensor import CPTensor, validate_cp_rank

    tensor = a["tensor"]
    rank = validate_cp_rank(tl.shape(tensor), rank=a["rank"])
    fixed = fixed_axes(a["fixed_modes"], tensor.ndim)
    init = a["init"]
    callback = a.get("callback")
    # TensorLy's own start (an nvecs start spans the same subspaces, but picks other
    # vectors where singular values tie, e.g. rank above the tensor's).
    weights, factors = _start(tensor, rank, init, a["svd"], a["random_state"],
                              a["normalize_factors"], non_negative=nonnegative)
    if nonnegative and any(np.any(factors[axis] < 0)
                           for axis in nonnegative_axes(a["nn_modes"], tensor.ndim)):
        raise ValueError("a start with negative entries (TensorLy's HALS keeps them)")
    card = sparse_entries(a.get("sparsity"), tensor.shape)
    if callback is not None:
        cp_start = CPTensor((weights if weights is not None else
                             tl.ones(rank, **tl.context(tensor)), factors))
        if card:  # TensorLy's robust CP: the error without the sparse component
            sparse = sparsify(tensor - tl.cp_to_tensor(cp_start), card)
            callback((cp_start, sparse), np.linalg.norm(tensor - tl.cp_to_tensor(cp_start) - sparse)
                     / np.linalg.norm(tensor))
        else:
            callback(cp_start, _relative_error(tensor, weights, factors))
    start = fold_weights(weights, factors, fixed)
    # TensorLy's line search: its acceptance rule, at the scales of its factors.
    native = dict(linesearch=bool(a.get("linesearch")), l2_reg=0.0, mask=None, n_starts=1,
                  compress="off", nonnegative=nonnegative,
                  linesearch_rule="tensorly")
    extra = dict(fixed_modes=fixed, return_errors=a["return_errors"],
                 cvg_criterion=a["cvg_criterion"], verbose=a["verbose"],
                 orthogonalise=a.get("orthogonalise", False), sparsity=card,
                 nn_modes=a.get("nn_modes", "all"))
    res = run_cp(_cp, tensor, rank, a["n_iter_max"], start, a["tol"] or 0.0, None,
                 a["normalize_factors"], callback, "cpu", None, native, extra,
                 start_callback=True, wrap=CPTensor)
    if a["return_errors"]:
        res, errors = res
        if nonnegative and not a["tol"]:
            errors = []  # TensorLy's HALS records errors only with a tolerance
    res, sparse = res if card else (res, None)
    weights, factors = res
    out = CPTensor((weights, list(factors)))
    if card:
        out = (out, sparse)
    return (out, errors) if a["return_errors"] else out


def _tucker(tensor, rank, fixed_factors=None, n_iter_max=100, init="svd", return_errors=False,
            svd="truncated_svd", tol=10e-5, random_state=None, mask=None, verbose=False):
    args = dict(locals())
    reason = _tensor_reason(tensor)
    if reason is None:
        if fixed_factors:
            reason = "fixed_factors"
        elif mask is not None:
            reason = "mask"
        elif not (isinstance(init, str) and init == "svd"):
            reason = f"init {init if isinstance(init, str) else type(init).__name__}"
        elif svd == "randomized_svd":
            reason = "svd randomized_svd"
        elif isinstance(n_iter_max, (bool, np.bool_)) or not isinstance(
                n_iter_max, (int, np.integer)) or n_iter_max < 1:
            reason = "n_iter_max < 1"
        elif (ranks := _tucker_ranks(tensor.shape, rank)) is None:
            reason = f"rank {rank!r}"
        elif ranks != tuple(tensor.shape):
            # Tenfold's HOOI starts from ST-HOSVD, TensorLy's from HOSVD: different local
            # optima. Only the untruncated case (every start exact) is served.
            reason = "HOOI start (Tenfold: ST-HOSVD, TensorLy: HOSVD)"

    def native():
        import tensorly as tl
        from tensorly.tucker_tensor import TuckerTensor, validate_tucker_rank

        r = rank
        if r is None:
            warnings.warn("No value given for 'rank'. The decomposition will preserve the "
                          "original size.", Warning)
            r = list(tensor.shape)
        ranks = validate_tucker_rank(tl.shape(tensor), rank=r)
        res = _direct_tucker(tensor, rank=list(ranks), method="hooi", n_iter_max=n_iter_max,
                     hooi_tol=tol or 0.0)
        errors = [np.float64(e) for e in res.error_history]
        if verbose:
            for prev, e in zip(errors[1:], errors[2:]):
                print(f"reconstruction error={e}, variation={prev - e}.")
        out = TuckerTensor((res.core, list(res.factors)))
        return (out, errors) if return_errors else out

    return _serve("tucker", reason, _originals["tucker"], args, native)


def _tucker_ranks(shape, rank):
    """The core shape TensorLy's tucker takes for `rank` (None: the tensor's shape; an int
    for every axis; a float or 'same' by validate_tucker_rank), or None where TensorLy
    makes no tuple of integers of it. validate_tucker_rank's warning for an int is left
    to the call that runs."""
    from tensorly.tucker_tensor import validate_tucker_rank

    if rank is None:
        return tuple(shape)
    try:
        ranks = ([rank] * len(shape) if isinstance(rank, int)  # TensorLy's test for an int
                 else list(validate_tucker_rank(tuple(shape), rank=rank)))
    except (TypeError, ValueError):
        return None
    if not all(_validate.is_integer(r) for r in ranks):
        return None
    return tuple(operator.index(r) for r in ranks)


_WRAPPERS = {
    "parafac": _parafac,
    "non_negative_parafac_hals": _non_negative_parafac_hals,
    "tucker": _tucker,
}
# tensor_train, non_negative_tucker and non_negative_tucker_hals (python/tenfold/_tensorly_tt.py)
_HOMES.update(_tensorly_tt.HOMES)
_WRAPPERS.update(_tensorly_tt.wrappers(_serve, _tensor_reason, _originals))
# parafac2 (python/tenfold/_tensorly_parafac2.py)
_HOMES.update(_tensorly_parafac2.HOMES)
_WRAPPERS.update(_tensorly_parafac2.make_wrappers(_serve, _originals))


def patch():
    """Installs Tenfold behind tensorly.decomposition's parafac, non_negative_parafac_hals,
    tucker and the functions of _HOMES' other entries, wherever TensorLy's modules hold them
    (the classes CP, CP_NN_HALS and Tucker call them through their modules). Idempotent."""
    import importlib

    with _lock:
        if _originals:
            return
        for name, home in _HOMES.items():
            module = importlib.import_module(home)
            original = getattr(module, name)
            wrapper = _WRAPPERS[name]
            # TensorLy's tests find a function's module by __module__ and monkeypatch it there.
            wrapper.__module__, wrapper.__name__ = original.__module__, original.__name__
            wrapper.__qualname__, wrapper.__doc__ = original.__qualname__, original.__doc__
            wrapper.__wrapped__ = original
            _originals[name] = original
            for mod_name, mod in list(sys.modules.items()):
                if not (mod_name == "tensorly" or mod_name.startswith("tensorly.")) or mod is None:
                    continue
                for attr, value in list(vars(mod).items()):
                    if value is original:
                        setattr(mod, attr, wrapper)
                        _replaced.append((mod, attr, original))


def unpatch():
    """Restores TensorLy's functions everywhere patch() replaced them."""
    with _lock:
        while _replaced:
            mod, attr, original = _replaced.pop()
            setattr(mod, attr, original)
        _originals.clear()
