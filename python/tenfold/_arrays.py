"""The copy rule of the package: which arrays enter the library in place."""

import numpy as np

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))


def float_dtype(dtype, what="dtype", complex_ok=False):
    """``None`` or a float32/float64 dtype (or, with `complex_ok`, complex64/complex128);
    ValueError naming `what` otherwise."""
    if dtype is None:
        return None
    dt = np.dtype(dtype)
    if dt.kind in "fc":
        dt = dt.newbyteorder("=")
    if dt not in _FLOATS + (_COMPLEX if complex_ok else ()):
        kinds = "float32 or float64" + (" (or complex64 or complex128)" if complex_ok else "")
        raise ValueError(f"{what} must be {kinds}, got {dt}")
    return dt


def as_float_array(x, name, dtype=None, complex_ok=False):
    """`x` as a float32 or float64 array in native byte order that is C- or Fortran-contiguous.

    The copy rule: a float32 or float64 ndarray that is C- or Fortran-contiguous is
    returned as it is (the library reads its memory in place) unless `dtype` asks for
    the other precision. Otherwise the array is copied once: to `dtype` if given, else
    float32/float64 arrays keep theirs (a big-endian one is byte-swapped in the copy)
    and bool, integer and float16 arrays become float64; the copy keeps Fortran order
    when the input was Fortran-contiguous, else it is C order. Complex, object, string,
    datetime and other non-real dtypes are refused (TypeError), with or without
    `dtype`, and so are masked arrays, whose mask the library would not see. With
    `complex_ok` (CP-ALS), complex64 and complex128 are served like float32 and float64
    (other complex dtypes, and a real array with a complex `dtype`, are copied to it).
    """
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a numpy.ma masked array, whose mask tenfold does not read: pass "
            f"numpy.ma.getdata({name}) with mask=~numpy.ma.getmaskarray({name}) to parafac, "
            "or fill the masked entries first"
        )
    a = x if isinstance(x, np.ndarray) else np.asarray(x)
    if a.dtype.kind not in ("biufc" if complex_ok else "biuf"):
        raise TypeError(
            f"{name} has dtype {a.dtype}; tenfold computes on real float32 or float64 data"
            + (" or complex64 or complex128 data" if complex_ok else "")
        )
    dt = float_dtype(dtype, complex_ok=complex_ok)
    if dt is not None and a.dtype.kind == "c" and dt.kind != "c":
        raise TypeError(f"{name} has dtype {a.dtype}; dtype={dt} would drop its imaginary part "
                        "(tenfold computes complex tensors as complex64 or complex128)")
    if dt is None:
        native = a.dtype.newbyteorder("=")
        if native in _FLOATS + _COMPLEX:
            dt = native
        elif a.dtype.kind in "biu" or native == np.float16:
            dt = np.dtype(np.float64)
        else:
            raise TypeError(
                f"{name} has dtype {a.dtype}; tenfold computes on float32 or float64 data "
                "(pass dtype= to round it to one of them)"
            )
    contiguous = a.flags.c_contiguous or a.flags.f_contiguous
    if a.dtype == dt and contiguous:
        return a
    order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
    return np.array(a, dtype=dt, order=order, copy=True)


def mask_like(mask, x):
    """The mask as uint8 with x's shape and memory order (copied: it is small next to x)."""
    m = np.asarray(mask)
    if m.shape != x.shape:
        raise ValueError(f"mask has shape {m.shape}, but the tensor has shape {x.shape}")
    if m.dtype != np.bool_ and m.dtype.kind not in "biuf":
        raise TypeError(f"mask must be boolean (or 0/1 numbers), got dtype {m.dtype}")
    if m.dtype.kind in "iuf" and not np.all((m == 0) | (m == 1)):
        raise ValueError("mask entries must be 0 or 1 (or True/False)")
    order = "F" if x.flags.f_contiguous and not x.flags.c_contiguous else "C"
    return np.array(m != 0, dtype=np.uint8, order=order)
