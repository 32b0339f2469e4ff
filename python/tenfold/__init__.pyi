from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, Optional, Union, overload

import numpy as np
import numpy.typing as npt

from ._tenfold import DeviceError as DeviceError
from ._tenfold import NumericalError as NumericalError
from . import sparse as sparse
from .sparse import cp_apr as cp_apr
from ._gcp import gcp as gcp
from ._parafac2 import Parafac2Result as Parafac2Result
from ._parafac2 import parafac2 as parafac2
from ._cmtf import CoupledCPResult as CoupledCPResult
from ._cmtf import coupled_matrix_tensor_3d_factorization as coupled_matrix_tensor_3d_factorization
from ._tt_nntucker import TensorTrainResult as TensorTrainResult
from ._tt_nntucker import tensor_train as tensor_train
from ._tt_nntucker import tensor_train_matrix as tensor_train_matrix
from ._tt_nntucker import tt_inner as tt_inner
from ._tt_nntucker import tt_norm as tt_norm
from ._tt_nntucker import tt_to_tensor as tt_to_tensor
from ._tt_nntucker import NonNegativeTuckerResult as NonNegativeTuckerResult
from ._tt_nntucker import non_negative_tucker as non_negative_tucker
from ._tt_nntucker import non_negative_tucker_hals as non_negative_tucker_hals

__version__: str

_DType = Union[None, type[np.float32], type[np.float64], np.dtype[Any], str]
_CpDType = Union[_DType, type[np.complex64], type[np.complex128]]  # parafac: complex too

class CpProgress(NamedTuple):
    iteration: int
    fit: float
    delta: float
    seconds: float

class CPResult(tuple[np.ndarray, list[np.ndarray]]):
    fit: float
    relative_error: float
    iterations: int
    converged: bool
    stop: str
    init: str
    fit_history: np.ndarray
    eigen_fallbacks: int
    revived_components: int
    best_start: int
    start_fits: list[float]
    line_search_accepted: int
    compressed: bool
    compression_ranks: list[int]
    compressed_iterations: int
    timings: dict[str, float]
    @property
    def weights(self) -> np.ndarray: ...
    @property
    def factors(self) -> list[np.ndarray]: ...
    @property
    def rank(self) -> int: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    def to_dict(self) -> dict[str, Any]: ...

class TuckerResult(tuple[np.ndarray, list[np.ndarray]]):
    relative_error: float
    compression_ratio: float
    eigenvalues: list[np.ndarray]
    mode_order: list[int]
    iterations: int
    converged: bool
    error_history: np.ndarray
    timings: dict[str, float]
    @property
    def core(self) -> np.ndarray: ...
    @property
    def factors(self) -> list[np.ndarray]: ...
    @property
    def rank(self) -> tuple[int, ...]: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    def to_dict(self) -> dict[str, Any]: ...

def parafac(
    tensor: npt.ArrayLike,
    rank: int,
    n_iter_max: int = 100,
    init: Union[str, tuple[Optional[npt.ArrayLike], Sequence[npt.ArrayLike]]] = "svd",
    tol: float = 1e-6,
    random_state: Optional[int] = None,
    normalize_factors: bool = True,
    callback: Optional[Callable[[CpProgress], Any]] = None,
    backend: str = "cpu",
    dtype: _CpDType = None,
    *,
    linesearch: bool = False,
    l2_reg: float = 0.0,
    mask: Optional[npt.ArrayLike] = None,
    n_starts: int = 0,
    compress: str = "auto",
    svd: str = "truncated_svd",
    orthogonalise: Union[bool, int] = False,
    verbose: int = 0,
    return_errors: bool = False,
    sparsity: Union[None, int, float] = None,
    cvg_criterion: str = "abs_rec_error",
    fixed_modes: Optional[Sequence[int]] = None,
    svd_mask_repeats: int = 5,
    solver: str = "exact",
    samples: int = 0,
    fit_check_every: int = 0,
    csf: str = "auto",
) -> Union[CPResult, tuple[Any, ...]]: ...
def non_negative_parafac_hals(
    tensor: npt.ArrayLike,
    rank: int,
    n_iter_max: int = 100,
    init: Union[str, tuple[Optional[npt.ArrayLike], Sequence[npt.ArrayLike]]] = "svd",
    tol: float = 1e-8,
    random_state: Optional[int] = None,
    normalize_factors: bool = True,
    callback: Optional[Callable[[CpProgress], Any]] = None,
    backend: str = "cpu",
    dtype: _DType = None,
    *,
    n_starts: int = 1,
    svd: str = "truncated_svd",
    sparsity_coefficients: Optional[Any] = None,
    fixed_modes: Optional[Sequence[int]] = None,
    nn_modes: Union[None, str, Sequence[int]] = "all",
    exact: bool = False,
    verbose: bool = False,
    return_errors: bool = False,
    cvg_criterion: str = "abs_rec_error",
) -> Union[CPResult, tuple[Any, ...]]: ...
def tucker(
    tensor: npt.ArrayLike,
    rank: Union[None, int, Sequence[int]] = None,
    tol: Optional[float] = None,
    method: str = "sthosvd",
    n_iter_max: int = 50,
    *,
    hooi_tol: float = 1e-6,
    mode_order: Optional[Sequence[int]] = None,
    backend: str = "cpu",
    dtype: _DType = None,
) -> TuckerResult: ...
def cuda_compiled() -> bool: ...
def cuda_available() -> bool: ...
def num_threads() -> int: ...
def set_num_threads(threads: int) -> None: ...
@overload
def show_config(mode: Literal["stdout"] = "stdout") -> None: ...
@overload
def show_config(mode: Literal["dicts"]) -> dict[str, Any]: ...
