"""The precisions a converted model's cache can be stored in (tenfold.torch.store_cache,
docs/kv-cache.md): which a model may use, how many stored numbers fit the bytes of one of
its own, and the rounding of what is cached."""

from __future__ import annotations

import torch

#: store_cache's dtypes by the name the config records, each with the model precisions
#: it serves (fewer bytes than theirs; the library's kernel reads both for float32).
CACHE_DTYPES = {"bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn}
_SERVES = {torch.bfloat16: (torch.float32,), torch.float8_e4m3fn: (torch.float32, torch.bfloat16, torch.float16)}


def cache_widening(dtype, computes: torch.dtype) -> int:
    """How many cached numbers in `dtype` fit the bytes of one in the model's precision
    `computes` (1 for None); refuses a dtype that is not one of CACHE_DTYPES or does not
    serve the model."""
    if dtype is None:
        return 1
    if dtype not in _SERVES:
        raise ValueError(f"cache_dtype must be torch.bfloat16, torch.float8_e4m3fn or None (the model's own "
                         f"precision), got {dtype!r}")
    if computes not in _SERVES[dtype]:
        names = ", ".join(str(t).removeprefix("torch.") for t in _SERVES[dtype])
        raise ValueError(f"cache_dtype: a {str(dtype).removeprefix('torch.')} cache is for {names} models; this "
                         f"model computes in {computes}")
    return torch.finfo(computes).bits // torch.finfo(dtype).bits


def as_stored(x: torch.Tensor, dtype) -> torch.Tensor:
    """x rounded to the cache's `dtype` (None: x): to nearest, float8 saturating at its
    largest number, 448 (it has no infinity; NaN stays NaN)."""
    if dtype is None:
        return x
    if dtype == torch.float8_e4m3fn:
        largest = torch.finfo(dtype).max
        x = x.clamp(-largest, largest)
    return x.to(dtype)
