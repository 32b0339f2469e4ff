"""Sparse tensors and count data: CP-ALS and CP-APR of coordinate data, and sparse tensor
files.

A sparse tensor is given as a ``(coords, values, shape)`` tuple (``coords`` of shape
(ndim, nnz), 0-based, as ``sparse.COO.coords``) or as any object with ``.coords``,
``.data`` and ``.shape`` (a pydata ``sparse.COO``; the package does not need it).
Axis n is row n of ``coords``. Duplicate coordinates are summed. The tensor is never
made dense (docs/sparse.md).
"""

import numbers
import operator

import numpy as np

from . import _validate
from ._arrays import float_dtype as _float_dtype
from ._results import CpAprResult, CPResult, CpProgress, _Result

__all__ = ["is_sparse", "as_coo", "parafac", "cp_apr", "load", "save", "CpAprResult"]


def is_sparse(tensor):
    """Whether `tensor` is a (coords, values, shape) tuple or has .coords (a 2-D array, as
    sparse.COO's, or one index array per axis, as scipy.sparse.coo_array's), .data and
    .shape."""
    if isinstance(tensor, tuple) and len(tensor) == 3 and not isinstance(tensor, _Result):
        # (coords (ndim, nnz), values (nnz,), shape): not a dense array written as a tuple
        coords, values, shape = tensor
        return (
            _index_rows(coords)
            and np.ndim(values) == 1
            and np.ndim(shape) == 1
            and all(isinstance(s, numbers.Real) for s in shape)  # as_coo takes whole numbers
        )
    return (
        not isinstance(tensor, np.ndarray)
        and all(hasattr(tensor, a) for a in ("coords", "data", "shape"))
        and _index_rows(tensor.coords)
    )


def _index_rows(coords):
    """Whether `coords` holds one row of indices per axis: a 2-D array, or a sequence of
    1-D arrays (not stacked here: that copies)."""
    if isinstance(coords, (tuple, list)):
        return len(coords) > 0 and all(np.ndim(c) == 1 for c in coords)
    return np.ndim(coords) == 2


def _sizes(shape):
    """`shape` as a list of ints: Python or NumPy integers, or floats that are whole
    numbers (20.0). ValueError naming the shape for any other entry."""
    try:
        sizes = shape.tolist() if isinstance(shape, np.ndarray) else list(shape)
    except TypeError:
        raise ValueError(f"shape must be a sequence of integers, got {shape!r}") from None
    sizes = [s.item() if isinstance(s, np.generic) else s for s in sizes]
    out = []
    for axis, s in enumerate(sizes):
        if _validate.is_integer(s):
            n = operator.index(s)
        elif isinstance(s, float) and s.is_integer():
            n = int(s)
        else:
            raise ValueError(f"shape must hold whole numbers, got {tuple(sizes)} (axis {axis}: {s!r})")
        if not 1 <= n <= _validate.INDEX_MAX:
            raise ValueError(f"shape {tuple(sizes)} has size {s!r} along axis {axis}; sizes must be "
                             f"in [1, {_validate.INDEX_MAX}]")
        out.append(n)
    return out


def as_coo(tensor, dtype=None):
    """(coords int64 (ndim, nnz) C order, values float (nnz,), shape list) of a sparse input.

    Values keep float32/float64 (other real dtypes become float64) unless `dtype` says
    otherwise. ValueError (one line) for coords that are not whole numbers, shapes that
    disagree, or a non-real dtype.
    """
    if isinstance(tensor, tuple):
        coords, values, shape = tensor
    else:
        coords, values, shape = tensor.coords, tensor.data, tensor.shape
    shape = _sizes(shape)
    if isinstance(coords, (tuple, list)) and len({np.shape(row) for row in coords}) > 1:
        raise ValueError(f"coords has rows of lengths {[np.size(row) for row in coords]}; "
                         "every row (axis) needs one index per value")
    c = np.asarray(coords)
    if c.dtype.kind not in "iu" and c.size > 0:
        raise ValueError(f"coords must hold integers, got dtype {c.dtype}")
    if c.dtype.kind == "u" and c.ndim == 2 and c.size > 0 and c.max() > np.iinfo(np.int64).max:
        # (cast to int64 they would wrap to negative indices)
        axis, entry = (int(i[0]) for i in np.nonzero(c > np.iinfo(np.int64).max))
        size = shape[axis] if axis < len(shape) else "?"
        raise ValueError(f"entry {entry} has index {int(c[axis, entry])} on axis {axis}, "
                         f"outside [0, {size})")
    c = np.ascontiguousarray(c, dtype=np.int64)
    if c.size == 0:
        c = c.reshape(len(shape), 0)
    v = np.asarray(values)
    dt = _float_dtype(dtype, "dtype")
    if dt is None:
        if v.dtype in (np.float32, np.float64):
            dt = v.dtype
        elif v.dtype.kind in "biu" or v.dtype == np.float16:
            dt = np.dtype(np.float64)
        else:
            raise TypeError(f"values have dtype {v.dtype}; tenfold computes on real float32 or float64 data")
    v = np.ascontiguousarray(v, dtype=dt).reshape(-1)
    if c.ndim != 2 or c.shape != (len(shape), v.shape[0]):
        raise ValueError(
            f"coords has shape {c.shape}, expected ({len(shape)}, {v.shape[0]}): one row per "
            "axis of shape, one column per value"
        )
    return c, v, shape


def parafac(tensor, rank, n_iter_max=100, init="svd", tol=1e-6, random_state=None,
            normalize_factors=True, callback=None, backend="cpu", dtype=None, *,
            linesearch=False, l2_reg=0.0, mask=None, n_starts=0, compress="auto", csf="auto"):
    """CP-ALS of a sparse tensor: :func:`tenfold.parafac`'s arguments and result.

    The MTTKRP runs on compressed sparse fibres (docs/sparse.md, "Layout"): `csf`
    'all', one tree per axis (the same bits for any thread count); 'two', a tree
    rooted at the smallest axis and one at the largest (about 2/N of the memory);
    'one', a single tree (about 1/N); 'auto' (the default), the first of these whose
    trees fit in 3/4 of the available memory. Not with `mask` (absent entries are
    zeros), ``compress='on'`` or ``backend='cuda'``. The result also carries ``nnz``
    (entries after summing duplicates) and ``csf`` (the layout that ran).
    """
    if mask is not None:
        raise ValueError("mask does not apply to a sparse tensor (its absent entries are zeros)")
    coords, values, shape = as_coo(tensor, dtype)
    rank = _validate.cp_rank(rank, shape)
    if isinstance(init, str):
        init_name = {"svd": "nvecs"}.get(init, init)
        if init_name not in ("nvecs", "random", "auto"):
            raise ValueError(
                f"init must be 'svd', 'nvecs', 'random', 'auto' or (weights, factors), got {init!r}"
            )
        given = []
    else:
        init_name, given = "given", _given_factors(init, values.dtype, len(shape), rank)
    if backend != "cpu":
        raise ValueError(f"sparse tensors are decomposed on backend='cpu' only, got {backend!r}")
    progress = None
    if callback is not None:
        def progress(iteration, fit, delta, seconds):
            return bool(callback(CpProgress(iteration, fit, delta, seconds)))
    from . import _tenfold

    r = _tenfold.sparse_cp_als(
        coords, values, shape, rank, _validate.integer(n_iter_max, "n_iter_max", 0, _validate.INT_MAX),
        init_name, _validate.nonnegative(tol, "tol"), _validate.random_seed(random_state), given,
        progress, bool(linesearch), _validate.nonnegative(l2_reg, "l2_reg"),
        _validate.integer(n_starts, "n_starts", 0, _validate.INT_MAX), str(compress), str(csf),
    )
    weights, factors = r.pop("weights"), r.pop("factors")
    if not normalize_factors:
        factors[0] = factors[0] * weights
        weights = np.ones_like(weights)
    return CPResult(weights, factors, **r)


def _given_factors(init, dtype, ndim, rank):
    """Factors of a (weights, factors) start, weights folded into axis 0."""
    try:
        weights, factors = init
    except (TypeError, ValueError):
        raise ValueError("init must be 'random', 'svd', 'nvecs', 'auto' or (weights, factors)")
    factors = [np.asarray(f, dtype=dtype) for f in factors]
    if len(factors) != ndim:
        raise ValueError(f"init has {len(factors)} factors for a tensor with {ndim} axes")
    if weights is not None:
        w = np.asarray(weights, dtype=dtype)
        if w.shape != (rank,):
            raise ValueError(f"init weights have shape {w.shape}, expected ({rank},)")
        if factors[0].ndim == 2 and factors[0].shape[1] == rank:
            factors[0] = factors[0] * w
    return factors


def cp_apr(tensor, rank, n_iter_max=1000, tol=1e-4, random_state=None, callback=None,
           dtype=None, *, init=None, n_inner_iter_max=10, kappa=0.01, kappa_tol=1e-10):
    """CP-APR: CP of nonnegative counts under a Poisson model (Chi and Kolda 2012).

    Parameters
    ----------
    tensor : array_like or sparse
        Counts: a dense array (only its nonzeros are read), a (coords, values, shape)
        tuple or a ``sparse.COO``. Values must be >= 0.
    rank : int
    n_iter_max : int
        Most outer iterations (the Tensor Toolbox's default, 1000).
    tol : float
        Stop when the KKT violation of every axis is below `tol`.
    random_state : int or None
        Seed of the random start (uniform in [0, 1)).
    init : sequence of arrays, optional
        The start instead: one nonnegative (I_n, rank) factor per axis.
    callback : callable, optional
        ``callback(iteration, kkt_violation, inner_iterations, seconds)`` after each
        outer iteration; returning True stops the run.
    n_inner_iter_max, kappa, kappa_tol : the multiplicative updates per axis and
        iteration, and the inadmissible-zero fix (as the Tensor Toolbox).

    Returns
    -------
    CpAprResult

    Examples
    --------
    >>> import numpy as np, tenfold
    >>> x = np.random.default_rng(0).poisson(2.0, (10, 8, 6))
    >>> res = tenfold.cp_apr(x, 2, random_state=1)
    >>> [f.shape for f in res.factors], bool(np.all(res.factors[0] >= 0))
    ([(10, 2), (8, 2), (6, 2)], True)
    """
    from . import _tenfold

    if is_sparse(tensor):
        coords, values, shape = as_coo(tensor, dtype)
    else:
        from ._arrays import as_float_array

        x = as_float_array(tensor, "tensor", dtype)
        nz = np.nonzero(x)
        coords = np.ascontiguousarray(np.array(nz, dtype=np.int64).reshape(x.ndim, -1))
        values, shape = np.ascontiguousarray(x[nz]), list(x.shape)
    progress = None
    if callback is not None:
        def progress(iteration, kkt, inner, seconds):
            return bool(callback(iteration, kkt, inner, seconds))
    given = [] if init is None else [np.asarray(f, dtype=values.dtype) for f in init]
    r = _tenfold.sparse_cp_apr(
        coords, values, shape, _validate.integer(rank, "rank", 1),
        _validate.integer(n_iter_max, "n_iter_max", 1, _validate.INT_MAX),
        _validate.integer(n_inner_iter_max, "n_inner_iter_max", 1, _validate.INT_MAX),
        _validate.number(tol, "tol"), _validate.nonnegative(kappa, "kappa"),
        _validate.nonnegative(kappa_tol, "kappa_tol"), _validate.random_seed(random_state), given,
        progress,
    )
    weights, factors = r.pop("weights"), r.pop("factors")
    return CpAprResult(weights, factors, **r)


def load(path, shape=None):
    """(coords, values, shape) of a .tns, .tns.gz or .tfsparse file (float64 values).

    `shape` (one size per axis) is the tensor's shape, every index checked against it;
    by default a .tns file's "# shape:" line, else its largest index per axis. A
    .tfsparse file stores its shape, which must equal a `shape` given.
    """
    from . import _tenfold

    d = _tenfold.load_sparse(str(path), [] if shape is None else _sizes(shape))
    return d["coords"], d["values"], tuple(d["shape"])


def save(path, tensor):
    """Writes a sparse tensor as .tns (1-based text), .tns.gz or .tfsparse (binary)."""
    from . import _tenfold

    coords, values, shape = as_coo(tensor, np.float64)
    _tenfold.save_sparse(str(path), coords, values, shape)

