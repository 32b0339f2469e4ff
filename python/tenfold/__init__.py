"""Tenfold: dense tensor decompositions (CP-ALS, Tucker) with an API shaped like TensorLy's.

Arrays are NumPy arrays in NumPy axis order. ``parafac`` and ``tucker`` read C- or
Fortran-contiguous float32/float64 input in place (see ``docs/python.md`` for the copy
rule), release the GIL while they compute, and return arrays that own their memory.
"""

import numpy as np

from . import _validate
from ._arrays import as_float_array as _as_float_array
from ._arrays import mask_like as _mask_like
from ._blas import extension_blas_environment as _extension_blas_environment
from ._results import CPResult, CpProgress, TuckerResult
from ._tensorly_args import run_cp as _run_cp

with _extension_blas_environment():
    from . import _tenfold
from ._tenfold import (
    DeviceError,
    NumericalError,
    cuda_available,
    cuda_compiled,
    num_threads,
)

__version__ = "0.1.0"
__all__ = [
    "parafac",
    "non_negative_parafac_hals",
    "tucker",
    "parafac2",
    "Parafac2Result",
    "coupled_matrix_tensor_3d_factorization",
    "CoupledCPResult",
    "tensor_train",
    "tensor_train_matrix",
    "tt_to_tensor",
    "tt_norm",
    "tt_inner",
    "TensorTrainResult",
    "non_negative_tucker",
    "non_negative_tucker_hals",
    "NonNegativeTuckerResult",
    "cp_apr",
    "gcp",
    "sparse",
    "CPResult",
    "TuckerResult",
    "CpProgress",
    "DeviceError",
    "NumericalError",
    "cuda_available",
    "cuda_compiled",
    "num_threads",
    "set_num_threads",
    "show_config",
]

from . import sparse  # noqa: E402  (after _tenfold: it calls into it)
from ._gcp import gcp  # noqa: E402
from ._parafac2 import Parafac2Result, parafac2  # noqa: E402
from ._cmtf import CoupledCPResult, coupled_matrix_tensor_3d_factorization  # noqa: E402
from .sparse import cp_apr  # noqa: E402
from ._tt_nntucker import (NonNegativeTuckerResult, TensorTrainResult,  # noqa: E402
                           non_negative_tucker, non_negative_tucker_hals, tensor_train,
                           tensor_train_matrix, tt_inner, tt_norm, tt_to_tensor)


def set_num_threads(threads):
    """Sets the number of threads the library computes with, for the rest of the process.

    0 restores the default (docs/api.md, "Threads"); a negative count is a ValueError. A
    count above 4 per CPU this process may run on is reduced to that, with a
    RuntimeWarning: more threads than that only add switching.
    """
    _tenfold.set_num_threads(_validate.thread_count(threads))


def show_config(mode="stdout"):
    """The build of the package: its version, the BLAS it calls and the kernels that BLAS
    chose for this processor when it loaded, the thread count and CUDA.

    mode="stdout" prints it; mode="dicts" returns it as a dict instead (as
    ``numpy.show_config``).
    """
    if mode not in ("stdout", "dicts"):
        raise ValueError(f"show_config: mode must be 'stdout' or 'dicts', not {mode!r}")
    library, version, kernel = _tenfold.blas_info()
    config = {
        "version": __version__,
        "blas": {"library": library, "version": version, "kernel": kernel},
        "threads": num_threads(),
        "cuda": {"compiled": cuda_compiled(), "available": cuda_available()},
    }
    if mode == "dicts":
        return config
    cuda = "available" if config["cuda"]["available"] else (
        "compiled, no device" if config["cuda"]["compiled"] else "not compiled")
    print(f"tenfold {__version__}\n"
          f"BLAS: {library} ({version})\n"
          f"BLAS kernels: {kernel}\n"
          f"threads: {config['threads']}\n"
          f"CUDA: {cuda}")


def _given_start(init, tensor, rank):
    """Factors (NumPy axis order) of a (weights, factors) start, weights folded into axis 0."""
    try:
        weights, factors = init
    except (TypeError, ValueError):
        raise ValueError("init must be 'random', 'svd', 'nvecs', 'auto' or (weights, factors)")
    cplx = tensor.dtype.kind == "c"  # a complex tensor takes real or complex factors
    factors = [_as_float_array(f, f"init factor {n}", tensor.dtype, cplx)
               for n, f in enumerate(factors)]
    _validate.cp_factors(factors, tensor.shape, rank)
    if weights is not None:
        w = _as_float_array(weights, "init weights", tensor.dtype, cplx)
        if w.shape != (rank,):
            raise ValueError(f"init weights have shape {w.shape}, expected ({rank},)")
        if not np.all(w == 1):
            factors[0] = np.asarray(factors[0] * w, dtype=tensor.dtype)
    return factors


def parafac(
    tensor,
    rank,
    n_iter_max=100,
    init="svd",
    tol=1e-6,
    random_state=None,
    normalize_factors=True,
    callback=None,
    backend="cpu",
    dtype=None,
    *,
    linesearch=False,
    l2_reg=0.0,
    mask=None,
    n_starts=0,
    compress="auto",
    svd="truncated_svd",
    orthogonalise=False,
    verbose=0,
    return_errors=False,
    sparsity=None,
    cvg_criterion="abs_rec_error",
    fixed_modes=None,
    svd_mask_repeats=5,
    solver="exact",
    samples=0,
    fit_check_every=0,
    csf="auto",
):
    """CP decomposition by alternating least squares (CP-ALS), like ``tensorly.decomposition.parafac``.

    Parameters
    ----------
    tensor : array_like, at least 2 axes, or sparse
        Read in place when it is a C- or Fortran-contiguous float32/float64 (or
        complex64/complex128) array; otherwise copied once (docs/python.md, "Copies").
        A complex tensor gets complex factors and real weights (stored as complex); it
        runs on the cpu backend without mask, nonnegative or compression
        (docs/algorithms.md, "Complex tensors"). A (coords, values, shape)
        tuple or a ``sparse.COO`` runs on the sparse entries (:func:`tenfold.sparse.parafac`).
    rank : int
        Number of components R, at most the smallest product of all sizes but one.
    n_iter_max : int
        Most iterations (sweeps over all axes); 0 returns the start (its fit in
        ``fit``), as TensorLy does.
    init : {'svd', 'nvecs', 'random', 'auto', 'gevd'} or (weights, factors)
        'svd' and 'nvecs' (the same start): leading eigenvectors of each unfolding's
        Gram (random columns past I_n); 'random': uniform [0, 1) from `random_state`;
        'gevd': algebraic, on the compressed core of a real 3-way tensor whose axes 0
        and 1 have at least `rank` entries (the eigenvectors of two mixtures of its
        slices); 'auto': gevd where the tensor is compressed first and it applies,
        else nvecs when every axis but the first has at most 4096 entries.
        (weights, factors): factors in NumPy axis order, weights (or None) folded
        into the first factor the sweep updates (the first axis not fixed).
    tol : float
        Stop when the fit changes by less than `tol` (TensorLy: the relative error).
    random_state : int or None
        Seed of the random start (None: 0, so runs repeat).
    normalize_factors : bool
        True: unit-norm columns, weights in descending order. False: weights are ones
        and the norms sit in the first factor.
    callback : callable, optional
        Called as ``callback(progress)`` with a :class:`CpProgress` after every
        iteration; returning True stops the run.
    backend : {'cpu', 'cuda'}
    dtype : {None, numpy.float32, numpy.float64, numpy.complex64, numpy.complex128}
        Precision to compute in; None keeps the input's (bool/integer input: float64).
    linesearch : bool
        Bro's extrapolation, as TensorLy's ``linesearch=True``, but a jump is kept when
        it lowers the error of the sweep it extends (TensorLy: of the previous sweep), so
        the fit never drops.
    l2_reg : float
        Ridge term added to each normal matrix (TensorLy's ``l2_reg``).
    mask : array_like of bool, optional
        The tensor's shape; False marks a missing entry (it may hold NaN), as
        TensorLy's ``mask``. EM-ALS; the fit is over the observed entries.
    n_starts : int
        Starts to run: the first from `init`, the others random with seeds
        random_state + 1, ...; the best final fit is returned. 0 (the default): up to
        64 on the compressed core when compression runs from the 'svd' (nvecs) or 'auto'
        start, else 1.
    compress : {'auto', 'on', 'off'}
        CP of the ST-HOSVD core first, then sweeps on the full tensor ('auto': where
        the core is at least 8x smaller and the tensor has at least 2^20 entries).
    solver : {'exact', 'sampled'}
        'sampled': each least-squares solve from `samples` rows of the Khatri-Rao
        product drawn by leverage score (CP-ARLS-LEV; deterministic given
        `random_state`); the fit of every sweep estimated from a fixed sample of
        entries, the exact fit computed when that estimate stops improving by more
        than its noise (or every `fit_check_every` sweeps) and after the last, the
        best checked model returned with its exact fit (docs/cp-variants.md). Dense tensors on
        the cpu backend, without mask, linesearch, fixed_modes, compress='on' or
        n_starts > 1.
    samples : int
        Sampled solver: rows per solve (0: 64 x rank).
    fit_check_every : int
        Sampled solver: sweeps between exact fits (0, the default: when the
        estimated fit stalls).
    csf : {'auto', 'all', 'two', 'one'}
        Sparse tensors: the compressed sparse fibre trees of the MTTKRP
        (:func:`tenfold.sparse.parafac`); the result's ``csf`` says which ran.
    svd, orthogonalise, verbose, return_errors, sparsity, cvg_criterion, fixed_modes, svd_mask_repeats
        TensorLy's arguments with TensorLy's meaning (docs/python.md, "TensorLy's
        arguments"): ``return_errors=True`` returns ``(result, errors)``;
        ``fixed_modes`` keeps those axes' start factors (the last axis cannot be fixed,
        as in TensorLy); ``cvg_criterion='rec_error'`` stops when the error decreases
        by less than `tol`; ``verbose`` prints the error per iteration;
        ``orthogonalise`` replaces the factors (those with at least `rank` rows) by the
        Q of their QR before TensorLy's iterations 0..orthogonalise (True is 1; a true
        value that is not an int: every iteration), not with ``fixed_modes``;
        ``sparsity`` (a count of entries, or a float: that fraction of the tensor's) is
        TensorLy's robust CP: the sweeps fit the tensor, the error (stopping rule, line
        search, errors) leaves out the residual's `sparsity` largest entries, and the
        call returns ``(result, sparse_component)``, those entries of the final residual
        (dense arrays without a mask only). A `callback` of two parameters is called TensorLy's way, as
        ``callback((weights, factors), rec_error)`` after every iteration. A
        ``numpy.random.RandomState`` or ``Generator`` as `random_state` draws the
        random start from it as TensorLy does.

    Returns
    -------
    CPResult
        Unpacks as ``(weights, factors)``; carries fit, iterations, converged,
        fit_history and timings.

    Raises
    ------
    ValueError
        Bad shape, rank or option, or a NaN/Inf entry (the message names it by its
        keyword, NumPy axis or NumPy index).
    TypeError
        An object or other non-numeric dtype (also with `dtype`), a masked
        array, or a non-integer rank or count (2.7, "2", True).
    MemoryError
        The run cannot fit in memory (checked before allocating).
    DeviceError
        backend='cuda' without a usable device or without the CUDA backend compiled.
    KeyboardInterrupt
        Ctrl-C, seen after the current iteration.

    Examples
    --------
    >>> import numpy as np, tenfold
    >>> rng = np.random.default_rng(0)
    >>> a, b, c = rng.random((30, 3)), rng.random((20, 3)), rng.random((10, 3))
    >>> x = np.einsum("ir,jr,kr->ijk", a, b, c)
    >>> weights, factors = tenfold.parafac(x, 3, tol=1e-12, n_iter_max=500)
    >>> [f.shape for f in factors]
    [(30, 3), (20, 3), (10, 3)]
    >>> bool(tenfold.parafac(x, 3, tol=1e-12, n_iter_max=500).fit > 0.9999)
    True
    """
    solver, samples, fit_check_every = _validate.cp_solver(
        solver, samples, fit_check_every, linesearch=linesearch, mask=mask, n_starts=n_starts,
        compress=compress, fixed_modes=fixed_modes, backend=backend,
        sparse=sparse.is_sparse(tensor))
    if sparse.is_sparse(tensor):  # a (coords, values, shape) tuple or a sparse.COO
        if sparsity or orthogonalise:
            raise ValueError("sparsity and orthogonalise apply to dense arrays, not to a sparse "
                             "tensor")
        return sparse.parafac(tensor, rank, n_iter_max, init, tol, random_state, normalize_factors,
                              callback, backend, dtype, linesearch=linesearch, l2_reg=l2_reg,
                              mask=mask, n_starts=n_starts, compress=compress, csf=csf)
    if csf != "auto":
        raise ValueError(f"csf={csf!r} applies to sparse tensors only")
    return _run_cp(
        _cp, tensor, rank, n_iter_max, init, tol, random_state, normalize_factors, callback,
        backend, dtype, dict(linesearch=linesearch, l2_reg=l2_reg, mask=mask, n_starts=n_starts,
                             compress=compress, nonnegative=False, solver=solver,
                             samples=samples, fit_check_every=fit_check_every),
        dict(svd=svd, orthogonalise=orthogonalise, verbose=verbose, return_errors=return_errors,
             sparsity=sparsity, cvg_criterion=cvg_criterion, fixed_modes=fixed_modes,
             svd_mask_repeats=svd_mask_repeats))


def non_negative_parafac_hals(
    tensor,
    rank,
    n_iter_max=100,
    init="svd",
    tol=1e-8,
    random_state=None,
    normalize_factors=True,
    callback=None,
    backend="cpu",
    dtype=None,
    *,
    n_starts=1,
    svd="truncated_svd",
    sparsity_coefficients=None,
    fixed_modes=None,
    nn_modes="all",
    exact=False,
    verbose=False,
    return_errors=False,
    cvg_criterion="abs_rec_error",
):
    """Non-negative CP by HALS, like ``tensorly.decomposition.non_negative_parafac_hals``.

    The same arguments and result as :func:`parafac` (no line search, mask or
    compression); every entry of a constrained factor is >= 0. The start is made
    non-negative there (absolute values of the nvecs start; random starts are uniform
    in [0, 1)). TensorLy's arguments as in :func:`parafac`; ``nn_modes`` ('all', None
    or axis numbers) are the constrained axes, the others take the plain
    least-squares update; ``sparsity_coefficients`` and ``exact=True`` raise
    ValueError.

    Examples
    --------
    >>> import numpy as np, tenfold
    >>> x = np.random.default_rng(1).random((20, 15, 10))
    >>> r = tenfold.non_negative_parafac_hals(x, 3)
    >>> bool(min(f.min() for f in r.factors) >= 0)
    True
    """
    return _run_cp(
        _cp, tensor, rank, n_iter_max, init, tol, random_state, normalize_factors, callback,
        backend, dtype, dict(linesearch=False, l2_reg=0.0, mask=None, n_starts=n_starts,
                             compress="off", nonnegative=True),
        dict(svd=svd, sparsity_coefficients=sparsity_coefficients, fixed_modes=fixed_modes,
             nn_modes=nn_modes, exact=exact, verbose=verbose, return_errors=return_errors,
             cvg_criterion=cvg_criterion))


def _cp(tensor, rank, n_iter_max, init, tol, random_state, normalize_factors, callback, backend,
        dtype, linesearch, l2_reg, mask, n_starts, compress, nonnegative, fixed_axes=(),
        callback_model=False, orthogonalise=0, linesearch_rule="tenfold", sparsity=0,
        nonnegative_axes=(), solver="exact", samples=0, fit_check_every=0):
    """CP-ALS in Tenfold's terms; `callback` sees (iteration, fit, delta, seconds[, model])."""
    x = _as_float_array(tensor, "tensor", dtype, complex_ok=True)
    _validate.tensor_axes(x)
    rank = _validate.cp_rank(rank, x.shape)
    if isinstance(init, str):
        init_name = {"svd": "nvecs"}.get(init, init)
        if init_name not in ("nvecs", "random", "auto", "gevd"):
            raise ValueError("init must be 'svd', 'nvecs', 'random', 'auto', 'gevd' or "
                             f"(weights, factors), got {init!r}")
        given = []
    else:
        init_name, given = "given", _given_start(init, x, rank)
    r = _tenfold.cp_als(
        x, rank, _validate.integer(n_iter_max, "n_iter_max", 0, _validate.INT_MAX), init_name,
        _validate.nonnegative(tol, "tol"), _validate.random_seed(random_state), given, callback,
        str(backend), bool(linesearch), _validate.nonnegative(l2_reg, "l2_reg"),
        None if mask is None else _mask_like(mask, x), bool(nonnegative),
        _validate.integer(n_starts, "n_starts", 0, _validate.INT_MAX), str(compress),
        [int(a) for a in fixed_axes], bool(callback_model), int(orthogonalise),
        str(linesearch_rule), int(sparsity), [int(a) for a in nonnegative_axes],
        solver, samples, fit_check_every,
    )
    weights, factors = r.pop("weights"), r.pop("factors")
    if not normalize_factors:
        # The scale into the last axis that is not fixed (the first one without fixed axes).
        free = [a for a in range(x.ndim) if a not in fixed_axes]
        axis = free[-1] if fixed_axes else 0
        factors[axis] = factors[axis] * weights
        weights = np.ones_like(weights)
    return CPResult(weights, factors, **r)


def tucker(
    tensor,
    rank=None,
    tol=None,
    method="sthosvd",
    n_iter_max=50,
    *,
    hooi_tol=1e-6,
    mode_order=None,
    backend="cpu",
    dtype=None,
):
    """Tucker decomposition (ST-HOSVD, HOSVD or HOOI), like ``tensorly.decomposition.tucker``.

    Parameters
    ----------
    tensor : array_like, at least 2 axes
        Read in place when C- or Fortran-contiguous float32/float64 (docs/python.md).
    rank : int or sequence of int, optional
        Multilinear ranks, one per axis (an int: the same for every axis). Give
        exactly one of `rank` and `tol`.
    tol : float, optional
        Relative error bound in (0, 1), as the program's ``tucker --tol``: each axis
        keeps the fewest singular vectors that guarantee ||X - X^|| <= tol ||X||.
        (TensorLy's ``tol`` is HOOI's stopping tolerance: here ``hooi_tol``.)
    method : {'sthosvd', 'hosvd', 'hooi'}
    n_iter_max : int
        HOOI: most sweeps.
    hooi_tol : float
        HOOI: stop when a sweep lowers the relative error by less.
    mode_order : sequence of int, optional
        Axes in the order ST-HOSVD processes them (default: automatic).
    backend : {'cpu', 'cuda'}
    dtype : {None, numpy.float32, numpy.float64}

    Returns
    -------
    TuckerResult
        Unpacks as ``(core, factors)``; carries relative_error, compression_ratio,
        eigenvalues, iterations and timings.

    Raises
    ------
    ValueError, TypeError, MemoryError, DeviceError
        As for :func:`parafac`.
    KeyboardInterrupt
        Ctrl-C, seen after the current mode step (one mode's Gram, eigensolver and
        TTM, of ST-HOSVD, HOSVD or a HOOI sweep).

    Examples
    --------
    >>> import numpy as np, tenfold
    >>> x = np.random.default_rng(0).random((30, 20, 10))
    >>> core, factors = tenfold.tucker(x, rank=[5, 4, 3])
    >>> core.shape, [f.shape for f in factors]
    ((5, 4, 3), [(30, 5), (20, 4), (10, 3)])
    """
    x = _as_float_array(tensor, "tensor", dtype)
    _validate.tensor_axes(x)
    if (rank is None) == (tol is None):
        raise ValueError("give exactly one of rank and tol (the relative error bound)")
    r = _tenfold.tucker(
        x, [] if rank is None else _validate.tucker_ranks(rank, x.shape),
        None if tol is None else _validate.fraction(tol, "tol"), str(method),
        _validate.integer(n_iter_max, "n_iter_max", 1, _validate.INT_MAX),
        _validate.nonnegative(hooi_tol, "hooi_tol"),
        [] if mode_order is None else _validate.mode_order(mode_order, x.ndim), str(backend),
    )
    return TuckerResult(r.pop("core"), r.pop("factors"), **r)
