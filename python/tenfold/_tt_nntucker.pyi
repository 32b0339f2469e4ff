from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

_DType = Union[None, type[np.float32], type[np.float64], np.dtype[Any], str]

class TensorTrainResult(tuple[np.ndarray, ...]):
    relative_error: float
    compression_ratio: float
    singular_values: list[np.ndarray]
    timings: dict[str, float]
    @property
    def factors(self) -> list[np.ndarray]: ...
    @property
    def rank(self) -> tuple[int, ...]: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    def to_dict(self) -> dict[str, Any]: ...
    def full(self) -> np.ndarray: ...
    def norm(self) -> float: ...
    def inner(self, other: Union[npt.ArrayLike, Sequence[npt.ArrayLike]]) -> float: ...

def tt_to_tensor(factors: Sequence[npt.ArrayLike]) -> np.ndarray: ...
def tt_norm(factors: Sequence[npt.ArrayLike]) -> float: ...
def tt_inner(
    factors: Sequence[npt.ArrayLike], other: Union[np.ndarray, Sequence[npt.ArrayLike]]
) -> float: ...
def tensor_train(
    tensor: npt.ArrayLike,
    rank: Union[None, int, Sequence[int]] = None,
    tol: Optional[float] = None,
    *,
    backend: str = "cpu",
    dtype: _DType = None,
) -> TensorTrainResult: ...
def tensor_train_matrix(
    tensor: npt.ArrayLike,
    rank: Union[None, int, Sequence[int]] = None,
    tol: Optional[float] = None,
    *,
    backend: str = "cpu",
    dtype: _DType = None,
) -> TensorTrainResult: ...

class NonNegativeTuckerResult(tuple[np.ndarray, list[np.ndarray]]):
    relative_error: float
    error_history: np.ndarray
    iterations: int
    converged: bool
    seconds: float
    @property
    def core(self) -> np.ndarray: ...
    @property
    def factors(self) -> list[np.ndarray]: ...
    @property
    def rank(self) -> tuple[int, ...]: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    def to_dict(self) -> dict[str, Any]: ...

_Init = Union[str, tuple[npt.ArrayLike, Sequence[npt.ArrayLike]]]
_RandomState = Union[None, int, np.random.RandomState, np.random.Generator]

def non_negative_tucker(
    tensor: npt.ArrayLike,
    rank: Union[int, Sequence[int]],
    n_iter_max: int = 10,
    init: _Init = "svd",
    tol: float = 10e-5,
    random_state: _RandomState = None,
    verbose: bool = False,
    return_errors: bool = False,
    normalize_factors: bool = False,
    *,
    backend: str = "cpu",
    dtype: _DType = None,
) -> Union[NonNegativeTuckerResult, tuple[NonNegativeTuckerResult, list[float]]]: ...
def non_negative_tucker_hals(
    tensor: npt.ArrayLike,
    rank: Union[int, Sequence[int]],
    n_iter_max: int = 100,
    init: _Init = "svd",
    svd: str = "truncated_svd",
    tol: Optional[float] = 1e-8,
    sparsity_coefficients: Any = None,
    core_sparsity_coefficient: Any = None,
    fixed_modes: Optional[Sequence[int]] = None,
    random_state: _RandomState = None,
    verbose: bool = False,
    normalize_factors: bool = False,
    return_errors: bool = False,
    exact: bool = False,
    algorithm: str = "fista",
    *,
    backend: str = "cpu",
    dtype: _DType = None,
) -> Union[NonNegativeTuckerResult, tuple[NonNegativeTuckerResult, list[float]]]: ...
