"""Argument checks of the Python functions, in the caller's terms.

The library checks its options again, but it names them by their C++ names and counts
modes in its column-major order (a C-order array's axes reversed). These checks run
first, so that a bad argument is named by its Python keyword and by NumPy axes and
shapes as the caller wrote them, and so that no value is truncated (2.7), parsed ("2")
or taken for an int (True) on its way into the extension.
"""

import math
import numbers
import operator
import os
import warnings

import numpy as np

INT_MAX = 2**31 - 1  # a C++ int (iteration and start counts)
INDEX_MAX = 2**63 - 1  # tenfold::index_t (sizes and ranks)
SEED_MAX = 2**64 - 1  # std::uint64_t (seeds)
THREADS_PER_CPU = 4  # set_num_threads: the most threads per CPU this process may run on


def is_integer(value):
    """Whether `value` is an integer as `integer` takes one: a Python or NumPy integer (any
    operator.index operand), not a bool."""
    if isinstance(value, (bool, np.bool_)):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def integer(value, name, minimum=None, maximum=INDEX_MAX):
    """`value` as an int: a Python or NumPy integer (not a bool) in [minimum, maximum]
    (None: no bound)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got the bool {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})") from None
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {v}")
    return v


def number(value, name):
    """`value` as a float: a Python or NumPy real number (not a bool, not a string)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    return float(value)


def nonnegative(value, name):
    """`value` as a float, finite and >= 0."""
    v = number(value, name)
    if not (math.isfinite(v) and v >= 0.0):
        raise ValueError(f"{name} must be finite and >= 0, got {v!r}")
    return v


def fraction(value, name):
    """`value` as a float in the open interval (0, 1)."""
    v = number(value, name)
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {v!r}")
    return v


def seed(value, name="random_state"):
    """A seed: an int in [0, 2**64 - 1]."""
    return integer(value, name, 0, SEED_MAX)


def random_seed(random_state):
    """The seed of `random_state`: None is 0 (so runs repeat), else as seed()."""
    return 0 if random_state is None else seed(random_state)


def tensor_axes(x, name="tensor"):
    """At least 2 axes, none of length 0."""
    if x.ndim < 2:
        raise ValueError(f"{name} must have at least 2 axes, got shape {x.shape}")
    for axis, n in enumerate(x.shape):
        if n == 0:
            raise ValueError(f"{name} has length 0 along axis {axis} (shape {x.shape}); "
                             "every axis needs at least one entry")


def cp_rank(rank, shape):
    """A CP rank for `shape`: at least 1, at most the smallest product of all sizes but one."""
    r = integer(rank, "rank", 1, None)  # the bound below is the tighter one
    numel = math.prod(shape)
    bound = min(numel // n for n in shape)
    if r > bound:
        raise ValueError(f"rank {r} exceeds {bound}, the largest CP rank of any tensor of shape "
                         f"{tuple(shape)} (the smallest product of all sizes but one)")
    return r


def cp_solver(solver, samples, fit_check_every, *, linesearch, mask, n_starts, compress,
              fixed_modes, backend, sparse):
    """(solver, samples, fit_check_every) of parafac, the sampled solver's exclusions
    named by their keywords."""
    if not isinstance(solver, str) or solver not in ("exact", "sampled"):
        raise ValueError(f"solver must be 'exact' or 'sampled', got {solver!r}")
    samples = integer(samples, "samples", 0)
    fit_check_every = integer(fit_check_every, "fit_check_every", 0, INT_MAX)
    if solver == "sampled":
        refused = [(sparse, "a sparse tensor"), (mask is not None, "mask"),
                   (bool(linesearch), "linesearch=True"), (fixed_modes, "fixed_modes"),
                   (str(compress) == "on", "compress='on'"),
                   (not isinstance(n_starts, (bool, np.bool_)) and isinstance(n_starts, int)
                    and n_starts > 1, f"n_starts={n_starts}"),
                   (str(backend) != "cpu", f"backend={backend!r} (it runs on the cpu)")]
        for refuse, what in refused:
            if refuse:
                raise ValueError(f"solver='sampled' cannot be combined with {what}")
    return solver, samples, fit_check_every


def cp_factors(factors, shape, rank):
    """Start factors in NumPy axis order: one (shape[n], rank) matrix per axis."""
    if len(factors) != len(shape):
        raise ValueError(f"init has {len(factors)} factors for a tensor with {len(shape)} axes")
    for axis, f in enumerate(factors):
        if f.shape != (shape[axis], rank):
            raise ValueError(f"init factor {axis} has shape {f.shape}, expected "
                             f"({shape[axis]}, {rank}) (length of axis {axis}, rank)")


def tucker_ranks(rank, shape):
    """Multilinear ranks in NumPy axis order from an int (every axis) or a sequence of ints."""
    if isinstance(rank, (str, bytes)) or not hasattr(rank, "__iter__"):
        ranks, names = [integer(rank, "rank", 1, None)] * len(shape), ["rank"] * len(shape)
    else:
        ranks = list(rank)
        if len(ranks) != len(shape):
            raise ValueError(f"rank has {len(ranks)} entries, but the tensor of shape "
                             f"{tuple(shape)} has {len(shape)} axes")
        names = [f"rank[{axis}]" for axis in range(len(shape))]
    numel = math.prod(shape)
    out = []
    for axis, (r, name) in enumerate(zip(ranks, names)):
        r = integer(r, name, 1, None)  # the shape bounds it below
        if r > shape[axis]:
            raise ValueError(f"{name} = {r} exceeds {shape[axis]}, the length of axis {axis} of "
                             f"shape {tuple(shape)}")
        if r > numel // shape[axis]:
            raise ValueError(f"{name} = {r} exceeds {numel // shape[axis]}, the product of the "
                             f"lengths of the axes other than {axis} of shape {tuple(shape)}: "
                             "no tensor of that shape has a larger rank along that axis")
        out.append(r)
    return out


def mode_order(order, ndim):
    """A permutation of the axes 0 .. ndim - 1."""
    if isinstance(order, (str, bytes)) or not hasattr(order, "__iter__"):
        raise TypeError(f"mode_order must be a sequence of axes, got {order!r}")
    axes = [integer(a, "mode_order entry") for a in order]
    if sorted(axes) != list(range(ndim)):
        raise ValueError(f"mode_order must be a permutation of the axes 0..{ndim - 1}, got {axes}")
    return axes


def usable_cpus():
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def thread_count(threads):
    """set_num_threads' argument: 0 (the default) or a count, capped with a warning at
    THREADS_PER_CPU times the usable CPUs."""
    n = integer(threads, "threads", 0, None)
    cap = THREADS_PER_CPU * usable_cpus()
    if n > cap:
        warnings.warn(f"set_num_threads({n}): this process may run on {usable_cpus()} CPUs; "
                      f"using {cap} threads ({THREADS_PER_CPU} per CPU), the most tenfold starts",
                      RuntimeWarning, stacklevel=3)
        return cap
    return n
