from typing import Any, Literal, Optional, Union

import numpy as np
import numpy.typing as npt

class CoupledCPResult(tuple[np.ndarray, list[np.ndarray]]):
    errors: list[float]
    relative_error: float
    iterations: int
    converged: bool
    seconds: float
    @property
    def weights(self) -> np.ndarray: ...
    @property
    def factors(self) -> list[np.ndarray]: ...
    @property
    def rank(self) -> int: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    def to_dict(self) -> dict[str, Any]: ...

def coupled_matrix_tensor_3d_factorization(
    tensor_3d: npt.ArrayLike, matrix: npt.ArrayLike, rank: int,
    init: Union[Literal["svd", "random"], tuple[Any, Any]] = ..., n_iter_max: int = ...,
    tol: float = ..., normalize_factors: bool = ..., *,
    mask: Union[None, Literal["nan"], npt.ArrayLike] = ...,
    matrix_mask: Optional[npt.ArrayLike] = ..., random_state: Optional[int] = ...,
    backend: str = ..., dtype: Any = ...,
) -> tuple[CoupledCPResult, CoupledCPResult, list[float]]: ...
