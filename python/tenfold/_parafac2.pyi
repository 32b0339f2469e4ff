from collections.abc import Sequence
from typing import Any, Literal, Optional, Union, overload

import numpy as np
import numpy.typing as npt

class Parafac2Result(tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]):
    errors: list[float]
    relative_error: float
    iterations: int
    converged: bool
    line_search_accepted: int
    seconds: float
    @property
    def weights(self) -> np.ndarray: ...
    @property
    def factors(self) -> list[np.ndarray]: ...
    @property
    def projections(self) -> list[np.ndarray]: ...
    @property
    def rank(self) -> int: ...
    @property
    def shape(self) -> tuple[tuple[int, int], ...]: ...
    def to_dict(self) -> dict[str, Any]: ...

_Slices = Union[npt.ArrayLike, Sequence[npt.ArrayLike]]
_Init = Union[Literal["svd", "random"], tuple[Any, ...], Sequence[Any]]
_Mask = Union[None, Literal["nan"], npt.ArrayLike, Sequence[npt.ArrayLike]]
_NnModes = Union[None, Literal["all"], Sequence[int]]

@overload
def parafac2(tensor_slices: _Slices, rank: int, n_iter_max: int = ..., init: _Init = ...,
             svd: str = ..., normalize_factors: bool = ..., tol: float = ...,
             nn_modes: _NnModes = ..., random_state: Optional[int] = ..., verbose: bool = ...,
             return_errors: Literal[False] = ..., n_iter_parafac: int = ...,
             linesearch: bool = ..., mask: _Mask = ..., *, backend: str = ...,
             dtype: Any = ...) -> Parafac2Result: ...
@overload
def parafac2(tensor_slices: _Slices, rank: int, n_iter_max: int = ..., init: _Init = ...,
             svd: str = ..., normalize_factors: bool = ..., tol: float = ...,
             nn_modes: _NnModes = ..., random_state: Optional[int] = ..., verbose: bool = ...,
             *, return_errors: Literal[True], n_iter_parafac: int = ...,
             linesearch: bool = ..., mask: _Mask = ..., backend: str = ...,
             dtype: Any = ...) -> tuple[Parafac2Result, list[float]]: ...
