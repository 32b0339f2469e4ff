"""Coupled matrix-tensor factorisation with TensorLy's API:
``tenfold.coupled_matrix_tensor_3d_factorization`` (docs/decompositions.md, "Coupled
matrix-tensor factorization")."""

import numpy as np

from . import _tenfold, _validate
from ._arrays import as_float_array, float_dtype, mask_like
from ._results import _KruskalResult

__all__ = ["coupled_matrix_tensor_3d_factorization", "CoupledCPResult"]


class CoupledCPResult(_KruskalResult):
    """One part of a coupled model, unpacking as ``(weights, factors)`` like TensorLy's
    ``CPTensor``: the tensor's [[A, B, C]] or the matrix's [[A, V]]. Attributes (the same on
    both parts): errors (TensorLy's list of squared errors), relative_error (over the
    observed entries of both), iterations, converged and seconds."""

    _headline = ("relative_error", "iterations", "converged")


def _normalized(factors):
    """TensorLy's cp_normalize: unit columns, the norms' product as weights."""
    weights = np.ones(factors[0].shape[1], dtype=factors[0].dtype)
    out = []
    for f in factors:
        norms = np.linalg.norm(f, axis=0)
        weights = weights * norms
        out.append(f / np.where(norms == 0, 1, norms))
    return weights, out


def _masks(mask, matrix_mask, x, y):
    if mask is None and matrix_mask is None:
        return None, None
    if isinstance(mask, str):
        if mask != "nan" or matrix_mask is not None:
            raise ValueError("mask must be an array of the tensor's shape or 'nan' (NaN entries of "
                             f"the tensor and the matrix are missing), got {mask!r}")
        return np.isfinite(x).astype(np.uint8), np.isfinite(y).astype(np.uint8)
    if mask is not None and np.shape(mask) != x.shape:
        raise ValueError(f"mask has shape {np.shape(mask)}, the tensor {x.shape}")
    if matrix_mask is not None and np.shape(matrix_mask) != y.shape:
        raise ValueError(f"matrix_mask has shape {np.shape(matrix_mask)}, the matrix {y.shape}")
    mx = np.ones(x.shape, np.uint8) if mask is None else mask_like(mask, x)
    my = np.ones(y.shape, np.uint8) if matrix_mask is None else mask_like(matrix_mask, y)
    return mx, my


def coupled_matrix_tensor_3d_factorization(tensor_3d, matrix, rank, init="svd", n_iter_max=100,
                                           tol=1e-6, normalize_factors=False, *, mask=None,
                                           matrix_mask=None, random_state=None, backend="cpu",
                                           dtype=None):
    """CMTF by ALS, TensorLy's coupled_matrix_tensor_3d_factorization on Tenfold:
    tensor_3d (I, J, K) ~ [[A, B, C]] and matrix (I, M) ~ [[A, V]].

    init: 'svd' (TensorLy's), 'random' (Tenfold's generator, random_state an int seed) or
    (weights, [A, B, C]). mask / matrix_mask: True or 1 where observed (the other part then
    fully observed), or mask='nan' (NaN entries of either are missing): fitted by EM
    (tensorly#610). Returns (tensor model, matrix model, errors) as TensorLy does, the errors
    ||X - [[A, B, C]]||^2 + ||Y - A V^T||^2 (observed entries) per iteration.
    """
    dt = float_dtype(dtype)
    x = as_float_array(tensor_3d, "tensor_3d", dt)
    y = as_float_array(matrix, "matrix", dt)
    common = np.result_type(x, y)
    x, y = np.ascontiguousarray(x, dtype=common), np.ascontiguousarray(y, dtype=common)
    if x.ndim != 3:
        raise ValueError(f"tensor_3d must be a 3-D array, got shape {x.shape}")
    if y.ndim != 2:
        raise ValueError(f"matrix must be a 2-D array, got shape {y.shape}")
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"the matrix has {y.shape[0]} rows, the tensor's first axis "
                         f"{x.shape[0]} (they share it)")
    mx, my = _masks(mask, matrix_mask, x, y)
    rank = _validate.integer(rank, "rank", 1)
    if isinstance(init, str):
        if init not in ("svd", "random"):
            raise ValueError(f"init must be 'svd', 'random' or (weights, factors), got {init!r}")
        name, start = init, []
    else:
        try:
            weights, factors = init
            start = [np.array(f, dtype=common) for f in factors]
        except (TypeError, ValueError):
            raise ValueError("init must be 'svd', 'random' or (weights, [A, B, C])") from None
        if len(start) != 3:
            raise ValueError(f"init needs 3 factors (A, B, C), got {len(start)}")
        if weights is not None:
            start[0] = start[0] * np.asarray(weights, dtype=common)
        name = "given"
    r = _tenfold.cmtf(x, y, mx, my, rank,
                      _validate.integer(n_iter_max, "n_iter_max", 1, _validate.INT_MAX),
                      _validate.nonnegative(tol, "tol"), name,
                      _validate.random_seed(random_state), start, str(backend))
    factors, v = r.pop("factors"), r.pop("v")
    ones = np.ones(rank, dtype=common)
    parts = [(ones, factors), (ones, [factors[0], v])]
    if normalize_factors:
        parts = [_normalized(f) for _, f in parts]
    tensor_cp, matrix_cp = (CoupledCPResult(w, list(f), **r) for w, f in parts)
    return tensor_cp, matrix_cp, list(r["errors"])
