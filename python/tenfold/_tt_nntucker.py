"""Tensor train (TT-SVD) and non-negative Tucker, with TensorLy's API
(docs/decompositions.md)."""

import math

import numpy as np

from . import _validate
from ._arrays import as_float_array
from ._results import TuckerResult, _plain, _Result

__all__ = ["tensor_train", "tensor_train_matrix", "tt_to_tensor", "tt_norm", "tt_inner",
           "TensorTrainResult", "non_negative_tucker",
           "non_negative_tucker_hals", "NonNegativeTuckerResult"]


class TensorTrainResult(_Result):
    """A tensor train that unpacks as its cores, like TensorLy's ``TTTensor``.

    ``tensorly.tt_to_tensor(result)`` reconstructs it. Core k has shape (r_k, I_k, r_k+1)
    with r_0 = r_N = 1 (TT-matrix cores: (r_k, I_k, O_k, r_k+1)). Attributes: factors
    (the cores), rank (r_0, ..., r_N), relative_error (||X - X^|| / ||X||),
    compression_ratio, singular_values (per bond 1..N-1, all singular values of the
    unfolding it was cut from) and timings (gram, eig, contract, total).
    """

    _headline = ("relative_error",)

    def __new__(cls, factors, **info):
        self = tuple.__new__(cls, factors)
        self.__dict__.update(info)
        return self

    def __getnewargs__(self):  # pickling: the cores, then the attributes
        return (list(self),)

    @property
    def factors(self):
        return list(self)

    @property
    def shape(self):
        return tuple(f.shape[1] if f.ndim == 3 else f.shape[1] * f.shape[2] for f in self)

    @property
    def rank(self):
        return (1,) + tuple(f.shape[-1] for f in self)

    def to_dict(self):
        return {"factors": list(self), **_plain(vars(self))}

    def full(self):
        """The dense tensor (mind the memory); as :func:`tt_to_tensor`."""
        return tt_to_tensor(self)

    def norm(self):
        """Frobenius norm from the cores alone; as :func:`tt_norm`."""
        return tt_norm(self)

    def inner(self, other):
        """Inner product with another tensor train or a dense array; as :func:`tt_inner`."""
        return tt_inner(self, other)


def _cores(factors, dtype=None):
    """TT cores as C-contiguous arrays of one float dtype (3-axis cores; TT-matrix cores
    (r, I, O, r') are merged to (r, I O, r'))."""
    cores = [as_float_array(np.asarray(g), f"factor {k}", dtype) for k, g in enumerate(factors)]
    if not cores:
        raise ValueError("a tensor train needs at least one core")
    dtype = np.result_type(*cores)
    out = []
    for k, g in enumerate(cores):
        if g.ndim == 4:
            g = g.reshape(g.shape[0], g.shape[1] * g.shape[2], g.shape[3])
        if g.ndim != 3:
            raise ValueError(f"factor {k} has shape {g.shape}, expected (r_k, I_k, r_k+1)")
        if out and out[-1].shape[2] != g.shape[0]:
            raise ValueError(f"factor {k - 1} has shape {out[-1].shape} and factor {k} "
                             f"{g.shape}: the ranks do not chain")
        out.append(np.ascontiguousarray(g, dtype=dtype))
    if out[0].shape[0] != 1 or out[-1].shape[2] != 1:
        raise ValueError(f"the boundary ranks must be 1, got {out[0].shape[0]} and "
                         f"{out[-1].shape[2]}")
    return out


def tt_to_tensor(factors):
    """The dense tensor of TT cores (r_k, I_k, r_k+1), formed by products of the cores
    (like ``tensorly.tt_to_tensor``; C order). TT-matrix cores (r_k, I_k, O_k, r_k+1) give
    the tensor of the merged axes (I_k O_k)."""
    from . import _tenfold

    return _tenfold.tt_contract("full", _cores(factors), [], None)


def tt_norm(factors):
    """Frobenius norm of a tensor train from its cores alone (O(N I r^3), no dense tensor)."""
    from . import _tenfold

    return _tenfold.tt_contract("norm", _cores(factors), [], None)


def tt_inner(factors, other):
    """<other, X> for a tensor train X (its cores) and another tensor train of the same shape
    (a list of cores), from the cores alone, or a dense array of X's shape, contracted with
    the cores without forming X."""
    from . import _tenfold

    cores = _cores(factors)
    if isinstance(other, np.ndarray):
        dense = np.ascontiguousarray(other, dtype=cores[0].dtype)
        shape = tuple(g.shape[1] for g in cores)
        if dense.shape != shape:
            raise ValueError(f"the tensor has shape {dense.shape}, the tensor train {shape}")
        return _tenfold.tt_contract("inner_dense", cores, [], dense)
    return _tenfold.tt_contract("inner", cores, _cores(other, cores[0].dtype), None)


def _tt_ranks(rank, shape):
    """TT ranks r_0..r_N in NumPy axis order from an int (every inner bond) or N + 1 ints."""
    n = len(shape)
    if isinstance(rank, (str, bytes)) or not hasattr(rank, "__iter__"):
        return _clipped([1] + [_validate.integer(rank, "rank", 1, None)] * (n - 1) + [1], shape)
    ranks = list(rank)
    if len(ranks) != n + 1:
        raise ValueError(f"rank has {len(ranks)} entries, but a tensor train of a tensor with "
                         f"{n} axes has {n + 1} (rank[0] = rank[{n}] = 1)")
    ranks = [_validate.integer(r, f"rank[{k}]", 1, None) for k, r in enumerate(ranks)]
    if ranks[0] != 1 or ranks[-1] != 1:
        raise ValueError(f"rank must start and end with 1 (boundary ranks), got {ranks[0]} and "
                         f"{ranks[-1]}")
    return _clipped(ranks, shape)


def _clipped(ranks, shape):
    """Each bond keeps at most min(rows, columns) of its unfolding: larger values are clipped
    (they could not reach the library as 64-bit integers)."""
    n = len(shape)
    most = [min(math.prod(shape[:k]), math.prod(shape[k:])) for k in range(n + 1)]
    return [min(r, m) for r, m in zip(ranks, most)]


def tensor_train(tensor, rank=None, tol=None, *, backend="cpu", dtype=None):
    """Tensor train (matrix product state) by TT-SVD, like ``tensorly.decomposition.tensor_train``.

    Parameters
    ----------
    tensor : array_like, at least 2 axes
        Read in place when C- or Fortran-contiguous float32/float64 (docs/python.md).
    rank : int or sequence of int, optional
        Largest TT ranks: an int for every bond, or N + 1 ints r_0 = 1, ..., r_N = 1. As
        in TensorLy, bond k keeps at most min(r_k, r_k-1 I_k-1, I_k ... I_N-1) singular
        vectors (a larger value is clipped). Give exactly one of `rank` and `tol`.
    tol : float, optional
        Relative error bound in (0, 1): each bond keeps the fewest singular vectors that
        guarantee ||X - X^|| <= tol ||X||.
    backend : {'cpu', 'cuda'}
    dtype : {None, numpy.float32, numpy.float64}

    Returns
    -------
    TensorTrainResult
        Unpacks as the cores (TensorLy's ``TTTensor`` factors), swept from axis 0: every
        core but the last has orthonormal (r_k I_k) x r_k+1 unfoldings, signs as
        TensorLy's (the largest entry of each singular vector positive).

    Raises
    ------
    ValueError, TypeError, MemoryError, DeviceError
        As for :func:`tenfold.tucker`.

    Examples
    --------
    >>> import numpy as np, tenfold
    >>> x = np.random.default_rng(0).random((8, 9, 10, 11))
    >>> tt = tenfold.tensor_train(x, rank=[1, 4, 6, 5, 1])
    >>> [g.shape for g in tt]
    [(1, 8, 4), (4, 9, 6), (6, 10, 5), (5, 11, 1)]
    """
    from . import _tenfold

    x = as_float_array(tensor, "tensor", dtype)
    _validate.tensor_axes(x)
    if (rank is None) == (tol is None):
        raise ValueError("give exactly one of rank and tol (the relative error bound)")
    r = _tenfold.tensor_train(
        x, [] if rank is None else _tt_ranks(rank, x.shape),
        None if tol is None else _validate.fraction(tol, "tol"), str(backend))
    return TensorTrainResult(r.pop("factors"), **r)


def tensor_train_matrix(tensor, rank=None, tol=None, *, backend="cpu", dtype=None):
    """A tensorised matrix in TT-matrix form, like ``tensorly.decomposition.tensor_train_matrix``.

    `tensor` has shape (I_0, ..., I_M-1, O_0, ..., O_M-1); its axes are interleaved
    (I_0, O_0, I_1, O_1, ...) and merged in pairs (one copy, as TensorLy does), and the
    tensor train of that order-M tensor is returned with cores reshaped to
    (r_k, I_k, O_k, r_k+1). `rank` (an int or M + 1 ints) and `tol` as in
    :func:`tensor_train`.
    """
    x = as_float_array(tensor, "tensor", dtype)
    if x.ndim % 2 or x.ndim < 2:
        raise ValueError(f"tensor must have an even number of axes (inputs, then outputs), got "
                         f"shape {x.shape}")
    m = x.ndim // 2
    ins, outs = x.shape[:m], x.shape[m:]
    if m == 1:  # one core: the matrix itself
        return TensorTrainResult([x.reshape(1, ins[0], outs[0], 1)], relative_error=0.0,
                                 compression_ratio=1.0, singular_values=[], timings={})
    order = [axis for pair in zip(range(m), range(m, 2 * m)) for axis in pair]
    merged = np.ascontiguousarray(x.transpose(order)).reshape([a * b for a, b in zip(ins, outs)])
    res = tensor_train(merged, rank, tol, backend=backend)
    cores = [g.reshape(g.shape[0], i, o, g.shape[2]) for g, i, o in zip(res, ins, outs)]
    return TensorTrainResult(cores, **vars(res))


class NonNegativeTuckerResult(TuckerResult):
    """A non-negative Tucker model that unpacks as ``(core, factors)`` like TensorLy's
    ``TuckerTensor``; every entry is >= 0.

    Attributes: core, factors (I_n x r_n, NumPy axis order), relative_error (after the
    last iteration), error_history (after each iteration), iterations, converged (stopped
    by tol) and seconds.
    """

    _headline = ("relative_error", "iterations", "converged")


def _given_tucker_start(init, x, ranks):
    """(core, factors) of a given start in x's dtype, the core in x's memory order."""
    try:
        core, factors = init
    except (TypeError, ValueError):
        raise ValueError("init must be 'svd', 'random' or (core, factors)") from None
    factors = [as_float_array(f, f"init factor {n}", x.dtype) for n, f in enumerate(factors)]
    if len(factors) != x.ndim:
        raise ValueError(f"init has {len(factors)} factors for a tensor with {x.ndim} axes")
    for axis, f in enumerate(factors):
        if f.shape != (x.shape[axis], ranks[axis]):
            raise ValueError(f"init factor {axis} has shape {f.shape}, expected "
                             f"{(x.shape[axis], ranks[axis])}")
    core = as_float_array(core, "init core", x.dtype)
    if core.shape != tuple(ranks):
        raise ValueError(f"init core has shape {core.shape}, expected {tuple(ranks)}")
    return np.asarray(core, order="C" if x.flags.c_contiguous else "F"), factors


def _nn_tucker(tensor, rank, method, n_iter_max, init, tol, random_state, normalize_factors,
               core_iters, backend, dtype, return_errors, algorithm="fista"):
    """Both methods in Tenfold's terms."""
    from . import _tenfold

    x = as_float_array(tensor, "tensor", dtype)
    _validate.tensor_axes(x)
    ranks = _validate.tucker_ranks(rank, x.shape)
    core, factors, seed = None, [], 0
    if isinstance(init, str) and init == "random" and isinstance(
            random_state, (np.random.RandomState, np.random.Generator)):
        # TensorLy's random start, drawn from the caller's generator
        draw = (random_state.random_sample if isinstance(random_state, np.random.RandomState)
                else random_state.random)
        init = (draw(ranks) + 0.01, [draw((s, r)) for s, r in zip(x.shape, ranks)])
    if isinstance(init, str):
        if init not in ("svd", "random"):
            raise ValueError(f"init must be 'svd', 'random' or (core, factors), got {init!r}")
        seed = _validate.random_seed(random_state)
    else:
        core, factors = _given_tucker_start(init, x, ranks)
    r = _tenfold.nonnegative_tucker(
        x, ranks, method, _validate.integer(n_iter_max, "n_iter_max", 0, _validate.INT_MAX),
        _validate.nonnegative(tol, "tol"),
        _validate.integer(core_iters, "core_iters", 0, _validate.INT_MAX), str(algorithm),
        bool(normalize_factors), init if isinstance(init, str) else "svd", seed, core, factors,
        str(backend))
    res = NonNegativeTuckerResult(r.pop("core"), r.pop("factors"), **r)
    if return_errors:
        return res, [np.float64(e) for e in res.error_history]
    return res


def non_negative_tucker(tensor, rank, n_iter_max=10, init="svd", tol=10e-5, random_state=None,
                        verbose=False, return_errors=False, normalize_factors=False, *,
                        backend="cpu", dtype=None):
    """Non-negative Tucker by multiplicative updates, like
    ``tensorly.decomposition.non_negative_tucker`` (Kim and Choi 2007).

    Parameters
    ----------
    tensor : array_like, at least 2 axes
        Read in place when C- or Fortran-contiguous float32/float64. Negative entries are
        allowed (they only fit worse).
    rank : int or sequence of int
        Core shape, one rank per axis (an int: every axis), at most the axis' length.
    n_iter_max : int
        Most iterations (0 returns the start).
    init : {'svd', 'random'} or (core, factors)
        'svd': absolute values of the leading singular vectors of each unfolding (TensorLy
        makes them non-negative by NNDSVD instead; ``tenfold.tensorly.patch()`` passes
        TensorLy's own start), the core |X x_0 |U_0|^T ...|; 'random': uniform factors and
        core + 0.01, from `random_state` (an int, or a NumPy generator drawn as TensorLy
        draws); (core, factors): a start with entries >= 0.
    tol : float
        Stop after iteration k >= 3 when the relative error changed by less than `tol`.
    verbose : bool
        Print the error and its change per iteration, as TensorLy.
    return_errors : bool
        Return ``(result, errors)`` with the relative error after each iteration.
    normalize_factors : bool
        Unit-norm factor columns, the norms moved into the core, after every iteration but
        a converged one.

    Returns
    -------
    NonNegativeTuckerResult
        Unpacks as ``(core, factors)``.

    Examples
    --------
    >>> import numpy as np, tenfold
    >>> x = np.random.default_rng(0).random((10, 9, 8))
    >>> core, factors = tenfold.non_negative_tucker(x, rank=[3, 3, 2], n_iter_max=50)
    >>> core.shape, bool(min(f.min() for f in factors) >= 0)
    ((3, 3, 2), True)
    """
    out = _nn_tucker(tensor, rank, "multiplicative", n_iter_max, init, tol, random_state,
                     normalize_factors, 0, backend, dtype, return_errors)
    if verbose:
        res = out[0] if return_errors else out
        _print_errors(res.error_history, res.converged)
    return out


def non_negative_tucker_hals(tensor, rank, n_iter_max=100, init="svd", svd="truncated_svd",
                             tol=1e-8, sparsity_coefficients=None, core_sparsity_coefficient=None,
                             fixed_modes=None, random_state=None, verbose=False,
                             normalize_factors=False, return_errors=False, exact=False,
                             algorithm="fista", *, backend="cpu", dtype=None):
    """Non-negative Tucker by HALS on the factors and FISTA on the core, like
    ``tensorly.decomposition.non_negative_tucker_hals``.

    The arguments and result of :func:`non_negative_tucker` (tol: 1e-8), with TensorLy's
    core solvers: up to `n_iter_max` FISTA passes per iteration (algorithm='fista'), or
    TensorLy's active-set NNLS on the normal equations (algorithm='active_set', memory
    (prod rank)^2 doubles). TensorLy's sparsity_coefficients, core_sparsity_coefficient,
    fixed_modes and exact=True are not available (ValueError); `svd` applies to TensorLy's
    start only and is accepted.

    Examples
    --------
    >>> import numpy as np, tenfold
    >>> x = np.random.default_rng(0).random((10, 9, 8))
    >>> r = tenfold.non_negative_tucker_hals(x, rank=3, n_iter_max=20)
    >>> r.core.shape, r.iterations <= 20
    ((3, 3, 3), True)
    """
    for name, value in (("sparsity_coefficients", sparsity_coefficients),
                        ("core_sparsity_coefficient", core_sparsity_coefficient)):
        if not _no_penalty(value):
            raise ValueError(f"{name} is not supported by Tenfold's non-negative Tucker")
    if fixed_modes:
        raise ValueError("fixed_modes is not supported by Tenfold's non-negative Tucker")
    if exact:
        raise ValueError("exact=True is not supported by Tenfold's non-negative Tucker")
    out = _nn_tucker(tensor, rank, "hals", n_iter_max, init, 0.0 if tol is None else tol,
                     random_state, normalize_factors, n_iter_max, backend, dtype, return_errors,
                     algorithm)
    if verbose:
        res = out[0] if return_errors else out
        _print_errors(res.error_history, res.converged)
    return out


def _no_penalty(value):
    """Whether TensorLy's sparsity coefficient(s) `value` penalise nothing (None or 0 each)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return all(v is None or (not isinstance(v, (list, tuple)) and v == 0) for v in values)


def _print_errors(errors, converged):
    """TensorLy's verbose lines: from the third iteration on, the error and its change."""
    for k in range(2, len(errors)):
        print(f"reconstruction error={errors[k]}, variation={errors[k - 1] - errors[k]}.")
    if converged:
        print(f"converged in {len(errors) - 1} iterations.")
