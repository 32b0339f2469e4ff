"""The precisions a converted model's cache can be stored in (tenfold.torch.store_cache,
docs/kv-cache.md): the torch dtypes offered, how many stored numbers fit the bytes of one
of the model's (the library's rule, shared with the program's --cache-dtype), and the
rounding of what is cached."""

from __future__ import annotations

import torch

from .. import _tenfold

#: store_cache's dtypes by the name the config records.
CACHE_DTYPES = {"bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn}


def cache_widening(dtype, computes: torch.dtype) -> int:
    """How many cached numbers in `dtype` fit the bytes of one in the model's precision
    `computes` (1 for None): tenfold.attention's cache_widening, which refuses a dtype that
    does not serve the model; other dtypes refused here."""
    if dtype is None:
        return 1
    if dtype not in CACHE_DTYPES.values():
        raise ValueError(f"cache_dtype must be torch.bfloat16, torch.float8_e4m3fn or None (the model's own "
                         f"precision), got {dtype!r}")
    return _tenfold.cache_widening(str(dtype).removeprefix("torch."), str(computes).removeprefix("torch."))


def as_stored(x: torch.Tensor, dtype) -> torch.Tensor:
    """x rounded to the cache's `dtype` (None: x): to nearest, float8 saturating at its
    largest number, 448 (it has no infinity; NaN stays NaN)."""
    if dtype is None:
        return x
    if dtype == torch.float8_e4m3fn:
        largest = torch.finfo(dtype).max
        x = x.clamp(-largest, largest)
    return x.to(dtype)
