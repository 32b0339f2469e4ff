"""What the decompositions return: tuples that unpack as TensorLy's models, with the
report of the run as attributes."""

from collections import namedtuple

import numpy as np

__all__ = ["CpProgress", "CPResult", "TuckerResult", "CpAprResult", "GcpResult"]

CpProgress = namedtuple("CpProgress", ["iteration", "fit", "delta", "seconds"])
CpProgress.__doc__ = """What a parafac callback sees after each iteration.

iteration is 1-based; fit is 1 - ||X - M|| / ||X||; delta is the change of fit (the
first iteration reports the fit itself); seconds is the wall time since the call began.
"""


def _plain(value):
    """`value` with NumPy scalars as Python numbers and lists and dicts copied."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class _Result(tuple):
    """The base of every result: a pair (weights or core, factors) with the report fields
    as attributes. Each kind sets `_first`, the name of the first part, and `_headline`,
    the report fields its repr shows after shape and rank."""

    def __new__(cls, first, factors, **info):
        self = super().__new__(cls, (first, factors))
        self.__dict__.update(info)
        return self

    def __getnewargs__(self):  # pickling: the two parts, then the attributes
        return tuple(self)

    @property
    def factors(self):
        return self[1]

    @property
    def shape(self):
        return tuple(f.shape[0] for f in self[1])

    def to_dict(self):
        """The parts and the report as a dict of Python values and NumPy arrays."""
        return {self._first: self[0], "factors": list(self[1]), **_plain(vars(self))}

    def __repr__(self):
        fields = [f"shape={self.shape}", f"rank={self.rank}"]
        for name in self._headline:
            value = getattr(self, name)
            fields.append(f"{name}={value:.6g}" if isinstance(value, float) else f"{name}={value}")
        return f"{type(self).__name__}({', '.join(fields)})"


class _KruskalResult(_Result):
    """A CP model: unpacks as ``(weights, factors)`` like TensorLy's ``CPTensor``."""

    _first = "weights"

    @property
    def weights(self):
        return self[0]

    @property
    def rank(self):
        return len(self[0])


class CPResult(_KruskalResult):
    """A CP model that unpacks as ``(weights, factors)`` like TensorLy's ``CPTensor``.

    ``tensorly.cp_to_tensor(result)`` reconstructs it. Attributes: weights (R,),
    factors (list of I_n x R arrays, NumPy axis order), fit, relative_error,
    iterations, converged, stop ("converged", "max_iters", "callback"), init (the
    start that ran), fit_history (fit after each iteration), eigen_fallbacks,
    revived_components (components restarted after falling to zero),
    best_start and start_fits (n_starts), line_search_accepted, compressed,
    compression_ranks and compressed_iterations (compression first), and timings
    (seconds per phase: init, compress, mttkrp, gram, solve, other, total).
    """

    _headline = ("fit", "iterations", "converged")


class CpAprResult(_KruskalResult):
    """A Poisson CP model that unpacks as ``(weights, factors)``.

    Attributes: weights, factors (NumPy axis order, nonnegative, unit 2-norm
    columns), iterations, inner_iterations, converged, stop, kkt_violation,
    kkt_history, inadmissible_zero_fixes, log_likelihood (sum x log m - m, without
    log x!), seconds and nnz.
    """

    _headline = ("log_likelihood", "iterations", "converged")


class GcpResult(_KruskalResult):
    """A GCP model that unpacks as ``(weights, factors)``, on the link scale (poisson:
    log-rates, bernoulli: log-odds). Attributes: weights, factors (NumPy axis order),
    iterations, converged, stop, objective, objective_history, seconds (and nnz for a
    sparse tensor)."""

    _headline = ("objective", "iterations", "converged")


class TuckerResult(_Result):
    """A Tucker model that unpacks as ``(core, factors)`` like TensorLy's ``TuckerTensor``.

    ``tensorly.tucker_to_tensor(result)`` reconstructs it. Attributes: core, factors
    (I_n x r_n, orthonormal columns, NumPy axis order), relative_error,
    compression_ratio, eigenvalues (per axis, the Gram eigenvalues the truncation
    saw), mode_order (axes in the order ST-HOSVD processed them), iterations and
    converged (HOOI), error_history (HOOI) and timings (gram, eig, ttm, total).
    """

    _first = "core"
    _headline = ("relative_error",)

    @property
    def core(self):
        return self[0]

    @property
    def rank(self):
        return self[0].shape
