"""The copy rule of the package: which arrays enter the library in place."""

import numpy as np

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def float_dtype(dtype, what="dtype"):
    """``None`` or a float32/float64 dtype; ValueError naming `what` otherwise."""
    if dtype is None:
        return None
    dt = np.dtype(dtype)
    if dt not in _FLOATS:
        raise ValueError(f"{what} must be float32 or float64, got {dt}")
    return dt


def as_float_array(x, name, dtype=None):
    """`x` as a float32 or float64 array that is C- or Fortran-contiguous.

    The copy rule: a float32 or float64 ndarray that is C- or Fortran-contiguous is
    returned as it is (the library reads its memory in place) unless `dtype` asks for
    the other precision. Otherwise the array is copied once: to `dtype` if given, else
    float32/float64 arrays keep theirs and bool, integer and float16 arrays become
    float64; the copy keeps Fortran order when the input was Fortran-contiguous, else
    it is C order. Complex, object, string and other dtypes are refused (TypeError).
    """
    a = x if isinstance(x, np.ndarray) else np.asarray(x)
    dt = float_dtype(dtype)
    if dt is None:
        if a.dtype in _FLOATS:
            dt = a.dtype
        elif a.dtype.kind in "biu" or a.dtype == np.float16:
            dt = np.dtype(np.float64)
        else:
            raise TypeError(
                f"{name} has dtype {a.dtype}; tenfold computes on real float32 or float64 data"
            )
    contiguous = a.flags.c_contiguous or a.flags.f_contiguous
    if a.dtype == dt and contiguous:
        return a
    order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
    return np.array(a, dtype=dt, order=order, copy=True)
