"""PARAFAC2 with TensorLy's API: ``tenfold.parafac2`` (docs/decompositions.md, "PARAFAC2")."""

import warnings

import numpy as np

from . import _tenfold, _validate
from ._arrays import as_float_array, float_dtype, mask_like
from ._results import _Result

__all__ = ["parafac2", "Parafac2Result"]


class Parafac2Result(_Result):
    """A PARAFAC2 model that unpacks as ``(weights, factors, projections)`` like TensorLy's
    ``Parafac2Tensor``: slice k is ``projections[k] @ B @ diag(weights * A[k]) @ C.T`` with
    ``factors = [A, B, C]`` (A: K x R, B: R x R, C: J x R, projections[k]: I_k x R).

    ``tensorly.parafac2_tensor.parafac2_to_slices(result)`` reconstructs the slices.
    Attributes: weights, factors, projections, errors (TensorLy's list of relative errors),
    relative_error (of the returned model, over the observed entries with a mask),
    iterations, converged, line_search_accepted and seconds.
    """

    _first = "weights"
    _headline = ("relative_error", "iterations", "converged")

    def __new__(cls, weights, factors, projections, **info):
        self = tuple.__new__(cls, (weights, factors, projections))
        self.__dict__.update(info)
        return self

    @property
    def weights(self):
        return self[0]

    @property
    def projections(self):
        return self[2]

    @property
    def rank(self):
        return len(self[0])

    @property
    def shape(self):
        """(I_k, J) of every slice."""
        return tuple((p.shape[0], self[1][2].shape[0]) for p in self[2])

    def to_dict(self):
        return {**super().to_dict(), "projections": list(self[2])}


def _slices(tensor_slices, dtype):
    """The slices as C-contiguous 2-D arrays of one float dtype (copied only where needed)."""
    if isinstance(tensor_slices, np.ndarray) and tensor_slices.ndim != 3:
        raise ValueError("tensor_slices must be a list of 2-D arrays or a 3-D array, got an array "
                         f"of shape {tensor_slices.shape}")
    slices = [as_float_array(s, f"slice {k}", dtype) for k, s in enumerate(tensor_slices)]
    if not slices:
        raise ValueError("parafac2 needs at least one slice, got none")
    for k, s in enumerate(slices):
        if s.ndim != 2:
            raise ValueError(f"slice {k} must be a 2-D array, got shape {s.shape}")
    common = float_dtype(dtype) or np.result_type(*slices)
    return [np.ascontiguousarray(s, dtype=common) for s in slices]


def _masks(mask, slices):
    """uint8 C-order masks (None without missing entries); mask="nan": NaN entries missing."""
    if mask is None:
        return None
    if isinstance(mask, str):
        if mask != "nan":
            raise ValueError(f"mask must be arrays, one per slice, or 'nan', got {mask!r}")
        if all(np.all(np.isfinite(s)) for s in slices):
            return None
        return [np.isfinite(s).astype(np.uint8) for s in slices]
    masks = list(mask)
    if len(masks) != len(slices):
        raise ValueError(f"got {len(masks)} masks for {len(slices)} slices")
    out = []
    for k, (m, s) in enumerate(zip(masks, slices)):
        if np.shape(m) != s.shape:
            raise ValueError(f"mask {k} has shape {np.shape(m)}, slice {k} has shape {s.shape}")
        out.append(mask_like(m, s))
    return out


def _nn_modes(nn_modes):
    if nn_modes is None:
        return []
    if isinstance(nn_modes, str):
        if nn_modes != "all":
            raise ValueError(f"nn_modes must be None, 'all' or modes 0, 1, 2, got {nn_modes!r}")
        modes = [0, 1, 2]
    else:
        modes = sorted({_validate.integer(n, "nn_modes entry", 0, 2) for n in nn_modes})
    if 1 in modes:
        warnings.warn("Mode `1` of PARAFAC2 fitted with ALS cannot be constrained to be truly "
                      "non-negative. See the documentation for more info.", UserWarning,
                      stacklevel=3)
    return modes


def _start(init, slices, rank):
    """A (weights, factors[, projections]) start as [A, B diag(weights), C]."""
    try:
        weights, factors = init[0], init[1]
        a, b, c = factors
    except (TypeError, ValueError, IndexError):
        raise ValueError("init must be 'svd', 'random', (weights, [A, B, C]) or a Parafac2Tensor")
    dt = slices[0].dtype
    a, b, c = (np.array(f, dtype=dt) for f in (a, b, c))
    if weights is not None:
        w = np.asarray(weights, dtype=dt)
        if w.shape != (rank,):
            raise ValueError(f"init weights have shape {w.shape}, expected ({rank},)")
        if b.ndim == 2 and b.shape[1] == rank:
            b = b * w
    return [a, b, c]


def parafac2(tensor_slices, rank, n_iter_max=2000, init="svd", svd="truncated_svd",
             normalize_factors=False, tol=1e-8, nn_modes=None, random_state=None, verbose=False,
             return_errors=False, n_iter_parafac=5, linesearch=True, mask=None, *,
             backend="cpu", dtype=None):
    """PARAFAC2 by ALS (Kiers, ten Berge and Bro), TensorLy's parafac2 on Tenfold.

    tensor_slices: a list of 2-D arrays X_k of shapes (I_k, J), the row counts free, or a
    3-D array (its slices along axis 0). Model: X_k ~ P_k B diag(a_k) C^T with P_k^T P_k = I.
    Arguments as TensorLy's (n_iter_parafac: inner CP sweeps per iteration; linesearch:
    Bro's extrapolation; nn_modes: HALS on the modes 0 (A), 1 (B), 2 (C)), except that the
    default start is 'svd' (TensorLy's is 'random'; Tenfold draws its own random start from
    random_state, an int seed) and that ``svd`` is accepted for compatibility only (the
    projections always use an exact SVD). mask: one array per slice (True or 1 where
    observed) or 'nan' (NaN entries are missing), fitted by EM; without a mask a NaN is
    an error. Returns a Parafac2Result, with ``return_errors`` also its error list.
    """
    if not isinstance(svd, str):
        raise TypeError(f"svd must be a str, got {type(svd).__name__}")
    slices = _slices(tensor_slices, dtype)
    masks = _masks(mask, slices)
    rank = _validate.integer(rank, "rank", 1)
    if isinstance(init, str):
        if init not in ("svd", "random"):
            raise ValueError(f"init must be 'svd', 'random' or a start, got {init!r}")
        name, start = init, []
    else:
        name, start = "given", _start(init, slices, rank)
    r = _tenfold.parafac2(
        slices, masks, rank, _validate.integer(n_iter_max, "n_iter_max", 0, _validate.INT_MAX),
        _validate.integer(n_iter_parafac, "n_iter_parafac", 1, _validate.INT_MAX),
        _validate.nonnegative(tol, "tol"), name, _validate.random_seed(random_state), start,
        bool(linesearch), bool(normalize_factors), _nn_modes(nn_modes), str(backend))
    errors = r.pop("errors")
    res = Parafac2Result(r.pop("weights"), r.pop("factors"), r.pop("projections"),
                         errors=errors, **r)
    if verbose:
        for it, e in enumerate(errors):
            print(f"PARAFAC2 iteration {it}: reconstruction error={e}")
    return (res, errors) if return_errors else res
