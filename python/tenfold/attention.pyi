import os
from collections.abc import Iterator, Mapping
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, os.PathLike[str]]

class CompressResult(Mapping[str, np.ndarray]):
    relative_error: float
    data_error: Optional[float]
    iterations: int
    converged: bool
    seconds: float
    params_before: int
    params_after: int
    def __getitem__(self, name: str) -> np.ndarray: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...

class LayerReport:
    index: int
    prefix: str
    relative_error: float
    data_error: Optional[float]
    iterations: int
    converged: bool
    seconds: float
    params_before: int
    params_after: int

class CheckpointReport:
    heads: int
    head_dim: int
    input_dim: int
    shared_dim: int
    layers: list[LayerReport]
    seconds: float
    params_before: int
    params_after: int
    calibration_tokens: int
    calibration_source: str

class EnergyCurve:
    energy: np.ndarray
    cumulative: np.ndarray
    dim90: int
    dim95: int
    dim99: int

class LayerRedundancy:
    index: int
    prefix: str
    products: EnergyCurve
    queries: EnergyCurve
    keys: EnergyCurve

def compress(
    query_weight: npt.ArrayLike,
    key_weight: npt.ArrayLike,
    query_bias: Optional[npt.ArrayLike] = None,
    *,
    heads: int,
    shared_dim: int,
    input_moment: Optional[npt.ArrayLike] = None,
    key_input_moment: Optional[npt.ArrayLike] = None,
    damping: float = 0.3,
    init: str = "structured",
    n_iter_max: int = 100,
    tol: float = 1e-6,
    random_state: int = 0,
    backend: str = "cpu",
    dtype: Any = None,
) -> CompressResult: ...
def compress_file(
    input: _Path,
    output: _Path,
    *,
    shared_dim: int,
    heads: int = 0,
    calibration: Optional[_Path] = None,
    damping: float = 0.3,
    init: str = "structured",
    n_iter_max: int = 100,
    tol: float = 1e-6,
    random_state: int = 0,
    backend: str = "cpu",
    float64: bool = False,
) -> CheckpointReport: ...
def analyze_file(input: _Path, *, heads: int = 0) -> list[LayerRedundancy]: ...

def value_latent(
    value_weight: npt.ArrayLike,
    output_weight: npt.ArrayLike,
    value_bias: Optional[npt.ArrayLike] = None,
    *,
    heads: int,
    key_heads: int,
    values: Optional[int] = None,
    moment: Optional[npt.ArrayLike] = None,
    damping: float = 0.01,
    key_weight: Optional[npt.ArrayLike] = None,
    key_bias: Optional[npt.ArrayLike] = None,
    query_weight: Optional[npt.ArrayLike] = None,
    query_bias: Optional[npt.ArrayLike] = None,
    key_emphasis: float = 1.0,
    inv_freq: Optional[npt.ArrayLike] = None,
    context: int = 2048,
) -> dict: ...
def value_expansion_folded(values: int, head_dim: int, hidden: int) -> bool: ...
