"""The TensorLy patch of parafac2 and coupled_matrix_tensor_3d_factorization
(tenfold.tensorly installs them with the others).

A parafac2 call runs natively when Tenfold computes what TensorLy 0.10 would from the same start
(the projections' SVDs keep min(R, I_k) = all singular vectors, so TensorLy's randomized
SVD is exact there too, up to rounding):
TensorLy's own start (its initialize_decomposition, drawing from random_state as it
would), the same inner sweeps at the same scales, Bro's line search with the same
acceptance rule, EM with the same imputations, TensorLy's error list and stopping rule.
"""

import numpy as np

from ._cmtf import coupled_matrix_tensor_3d_factorization as _tenfold_cmtf
from ._parafac2 import parafac2 as _tenfold_parafac2

HOMES = {"parafac2": "tensorly.decomposition._parafac2",
         "coupled_matrix_tensor_3d_factorization": "tensorly.decomposition._cmtf_als"}


def _slices_reason(tensor_slices):
    import tensorly as tl

    if tl.get_backend() != "numpy":
        return f"backend {tl.get_backend()}"
    if isinstance(tensor_slices, np.ndarray):
        if tensor_slices.ndim != 3:
            return "tensor of order other than 3"
        slices = list(tensor_slices)
    elif isinstance(tensor_slices, (list, tuple)):
        slices = list(tensor_slices)
    else:
        return f"tensor_slices type {type(tensor_slices).__name__}"
    if not slices:
        return "no slices"
    for s in slices:
        if not isinstance(s, np.ndarray):
            return f"slice type {type(s).__name__}"
        if s.dtype not in (np.float32, np.float64) or s.dtype != slices[0].dtype:
            return f"slice dtype {s.dtype}"
        if s.ndim != 2 or s.size == 0:
            return "a slice that is not a non-empty matrix"
        if s.shape[1] != slices[0].shape[1]:
            return "slices with different column counts (TensorLy asserts)"
    return None


def _reason(a):
    reason = _slices_reason(a["tensor_slices"])
    if reason:
        return reason
    slices = list(a["tensor_slices"])
    rank, n_iter_max, init, nn_modes = a["rank"], a["n_iter_max"], a["init"], a["nn_modes"]
    if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)):
        return "rank type"
    if not 1 <= rank <= slices[0].shape[1]:
        return "rank outside 1 ... columns (TensorLy asserts)"
    if isinstance(n_iter_max, (bool, np.bool_)) or not isinstance(n_iter_max, (int, np.integer)):
        return "n_iter_max type"
    if n_iter_max < 1:
        return "n_iter_max < 1"
    if not isinstance(a["n_iter_parafac"], (int, np.integer)) or a["n_iter_parafac"] < 1:
        return "n_iter_parafac < 1"
    if a["svd"] not in ("truncated_svd", "randomized_svd"):
        return f"svd {a['svd']}"
    if a["svd"] == "randomized_svd" and isinstance(a["random_state"], np.random.RandomState):
        # (each projection draws from it in TensorLy; its state after the call would differ)
        return "randomized_svd with a RandomState"
    if not (isinstance(init, str) or isinstance(init, (tuple, list))
            or type(init).__name__ in ("CPTensor", "Parafac2Tensor")):
        return "init type"
    mask = a["mask"]
    if mask is not None:
        if not isinstance(init, str):
            return "mask with a given start (TensorLy imputes from the start's projections)"
        try:
            masks = [np.asarray(m) for m in mask]
        except TypeError:
            return "mask type"
        if len(masks) != len(slices) or any(m.shape != s.shape for m, s in zip(masks, slices)):
            return "mask shapes"
        if any(not np.any(m) for m in masks):
            return "a slice without observed entries"
        if not all(np.all(np.isfinite(np.where(m != 0, s, 0))) for m, s in zip(masks, slices)):
            return "non-finite observed entries"
    elif not all(np.all(np.isfinite(s)) for s in slices):
        return "non-finite entries"
    if a["linesearch"] and n_iter_max > 6:
        if not a["tol"]:
            return "linesearch without tol (TensorLy reads an empty error list)"
        if isinstance(nn_modes, str):
            return "nn_modes 'all' with linesearch (TensorLy's clip tests `0 in 'all'`)"
        if nn_modes is not None and 1 in nn_modes:
            return "nn_modes with mode 1 and linesearch (the jump leaves B negative)"
    if nn_modes is not None and not isinstance(nn_modes, str):
        try:
            if any(int(n) not in (0, 1, 2) for n in nn_modes):
                return "nn_modes outside 0, 1, 2"
        except (TypeError, ValueError):
            return "nn_modes type"
    elif isinstance(nn_modes, str) and nn_modes != "all":
        return f"nn_modes {nn_modes!r}"
    return None


def _native(a):
    import tensorly as tl
    from tensorly.decomposition._parafac2 import initialize_decomposition
    from tensorly.parafac2_tensor import Parafac2Tensor

    slices = list(a["tensor_slices"])
    rank = int(a["rank"])
    random_state = a["random_state"]
    rng = random_state if isinstance(random_state, np.random.RandomState) else None
    state = rng.get_state() if rng is not None else None
    weights, factors, _ = initialize_decomposition(slices, rank, init=a["init"], svd=a["svd"],
                                                   random_state=random_state)
    nn_modes = a["nn_modes"]
    modes = [0, 1, 2] if nn_modes == "all" else list(nn_modes or [])
    try:
        if any(np.any(np.asarray(factors[m]) < 0) for m in modes):
            raise ValueError("a start with negative entries (TensorLy's HALS keeps them)")
        start = [np.asarray(f) for f in factors]
        if weights is not None:
            start[1] = start[1] * np.asarray(weights)
        res = _tenfold_parafac2(
            slices, rank, n_iter_max=int(a["n_iter_max"]), init=(None, start),
            normalize_factors=bool(a["normalize_factors"]), tol=float(a["tol"] or 0.0),
            nn_modes=None if not modes else modes, return_errors=False,
            n_iter_parafac=int(a["n_iter_parafac"]), linesearch=bool(a["linesearch"]),
            mask=None if a["mask"] is None else [np.asarray(m) != 0 for m in a["mask"]])
    except Exception:
        if rng is not None:  # TensorLy's own run draws its start again
            rng.set_state(state)
        raise
    errors = [np.float64(e) for e in res.errors] if a["tol"] else []
    if a["verbose"]:
        for it, e in enumerate(errors):
            print(f"PARAFAC2 reconstruction error={e}")
    out = Parafac2Tensor((tl.tensor(res.weights), list(res.factors), list(res.projections)))
    return (out, errors) if a["return_errors"] else out


def _cmtf_reason(a):
    import tensorly as tl

    if tl.get_backend() != "numpy":
        return f"backend {tl.get_backend()}"
    x, y = a["tensor_3d"], a["matrix"]
    if not isinstance(x, np.ndarray) or not isinstance(y, np.ndarray):
        return "tensor or matrix not an ndarray"
    if x.dtype not in (np.float32, np.float64) or y.dtype != x.dtype:
        return f"dtypes {x.dtype}, {y.dtype}"
    if x.ndim != 3 or y.ndim != 2 or y.shape[0] != x.shape[0] or 0 in x.shape + y.shape:
        return "shapes (TensorLy fails)"
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return "non-finite entries"
    rank, n_iter_max, init = a["rank"], a["n_iter_max"], a["init"]
    if isinstance(rank, (bool, np.bool_)) or not isinstance(rank, (int, np.integer)) or rank < 1:
        return "rank"
    if isinstance(n_iter_max, (bool, np.bool_)) or not isinstance(n_iter_max, (int, np.integer)):
        return "n_iter_max type"
    if n_iter_max < 1:
        return "n_iter_max < 1 (TensorLy returns an undefined V)"
    if not (isinstance(init, str) or isinstance(init, (tuple, list))
            or type(init).__name__ == "CPTensor"):
        return "init type"
    if isinstance(a["tol"], (bool, np.bool_)) or not isinstance(a["tol"], (int, float, np.floating)):
        return "tol type"
    return None


def _cmtf_native(a):
    import warnings

    import tensorly as tl
    from tensorly.cp_tensor import CPTensor, validate_cp_rank
    from tensorly.decomposition._cp import initialize_cp

    x, y = a["tensor_3d"], a["matrix"]
    # TensorLy's start: A from the coupled unfolding [X_(0), Y], B and C from the tensor
    rank = validate_cp_rank(tl.shape(x), rank=a["rank"])
    start = initialize_cp(x, rank, init=a["init"])
    coupled = initialize_cp(tl.concatenate((tl.unfold(x, 0), y), axis=1), rank, init=a["init"])
    factors = [np.asarray(coupled.factors[0])] + [np.asarray(f) for f in start.factors[1:]]
    tensor_cp, matrix_cp, errors = _tenfold_cmtf(x, y, rank, init=(None, factors),
                                                 n_iter_max=int(a["n_iter_max"]),
                                                 tol=float(a["tol"]),
                                                 normalize_factors=bool(a["normalize_factors"]))
    if not tensor_cp.converged:
        warnings.warn("Reached maximum iteration number without convergence.")
    out_x = CPTensor((tensor_cp.weights, list(tensor_cp.factors)))
    out_y = CPTensor((matrix_cp.weights, list(matrix_cp.factors)))
    return out_x, out_y, [np.float64(e) for e in errors]


def make_wrappers(serve, originals):
    """The patched functions; `serve` and `originals` are tenfold.tensorly's."""

    def parafac2(tensor_slices, rank, n_iter_max=2000, init="random", svd="truncated_svd",
                 normalize_factors=False, tol=1.0e-8, nn_modes=None, random_state=None,
                 verbose=False, return_errors=False, n_iter_parafac=5, linesearch=True,
                 mask=None):
        args = dict(tensor_slices=tensor_slices, rank=rank, n_iter_max=n_iter_max, init=init,
                    svd=svd, normalize_factors=normalize_factors, tol=tol, nn_modes=nn_modes,
                    random_state=random_state, verbose=verbose, return_errors=return_errors,
                    n_iter_parafac=n_iter_parafac, linesearch=linesearch, mask=mask)
        return serve("parafac2", _reason(args), originals["parafac2"], args,
                     lambda: _native(args))

    def coupled_matrix_tensor_3d_factorization(tensor_3d, matrix, rank, init="svd",
                                               n_iter_max=100, tol=1e-6,
                                               normalize_factors=False):
        args = dict(tensor_3d=tensor_3d, matrix=matrix, rank=rank, init=init,
                    n_iter_max=n_iter_max, tol=tol, normalize_factors=normalize_factors)
        name = "coupled_matrix_tensor_3d_factorization"
        return serve(name, _cmtf_reason(args), originals[name], args, lambda: _cmtf_native(args))

    return {"parafac2": parafac2,
            "coupled_matrix_tensor_3d_factorization": coupled_matrix_tensor_3d_factorization}
