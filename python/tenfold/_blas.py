"""The environment in which the extension loads its OpenBLAS.

The binary wheel (scripts/build_wheel.sh) carries its own OpenBLAS, scipy-openblas
(``libscipy_openblas.so`` beside the extension): a pthreads build that starts one thread
per processor as it loads, although the library runs every BLAS call on its own threads,
one at a time. It is loaded with OPENBLAS_NUM_THREADS=1, so that it starts none; the
variable is set back right after (the library's own thread count reads it later). Its
kernels know current processors (DYNAMIC_ARCH), so nothing else is done.

A build linked to the system's OpenBLAS (``pip install .``, a CMake build of the
extension) gets its kernels chosen as the tenfold program chooses them. OpenBLAS picks
its kernels when it loads, from the processor model; a processor newer than the
OpenBLAS build (Debian 12's 0.3.21 on recent Intel models) gets the generic
kernels of an old one, at a quarter to a half of the speed its Haswell (AVX2) kernels
reach there. The program (tools/main.cpp) then runs itself again with
OPENBLAS_CORETYPE=Haswell; a Python process cannot, so before the extension loads
OpenBLAS, this module loads it once on its own to ask which kernels it picks, unloads it
and, in that case, lets the extension load it with OPENBLAS_CORETYPE=Haswell (removed
from the environment again right after). Results are then the program's, bit for bit.
Nothing happens when the user set OPENBLAS_CORETYPE, when OpenBLAS is already loaded,
or when the processor lacks AVX2 or FMA.
"""

import contextlib
import ctypes
import os

OPENBLAS = "libopenblas.so.0"
# The package's own OpenBLAS, where it carries one.
PACKAGE_OPENBLAS = os.path.join(os.path.dirname(__file__), "libscipy_openblas.so")
# The kernels tools/main.cpp treats as pre-AVX2 (the same list).
PRE_AVX2 = {
    "katmai", "coppermine", "northwood", "prescott", "banias", "atom", "core2", "penryn",
    "dunnington", "nehalem", "opteron", "barcelona",
}


def _has_avx2_and_fma():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return "avx2" in flags and "fma" in flags
    except OSError:
        pass
    return False


def _openblas_picks_pre_avx2_kernels():
    """Loads OpenBLAS, reads its kernel name, unloads it again."""
    try:
        ctypes.CDLL(OPENBLAS, mode=os.RTLD_NOLOAD)
        return False  # already loaded by someone else: its choice stands
    except OSError:
        pass
    try:
        lib = ctypes.CDLL(OPENBLAS)
    except OSError:
        return False
    get = getattr(lib, "openblas_get_corename", None)
    core = ""
    if get is not None:
        get.restype = ctypes.c_char_p
        core = (get() or b"").decode().lower()
    import _ctypes

    _ctypes.dlclose(lib._handle)
    return core in PRE_AVX2


@contextlib.contextmanager
def _environment(name, value):
    """name=value in the environment for the block, then as it was."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved


def extension_blas_environment():
    """Around the extension's import: no threads of the package's own OpenBLAS, or for the
    system's OpenBLAS, OPENBLAS_CORETYPE=Haswell where the program would set it."""
    if os.path.exists(PACKAGE_OPENBLAS):
        return _environment("OPENBLAS_NUM_THREADS", "1")
    if (
        "OPENBLAS_CORETYPE" not in os.environ
        and _has_avx2_and_fma()
        and _openblas_picks_pre_avx2_kernels()
    ):
        return _environment("OPENBLAS_CORETYPE", "Haswell")
    return contextlib.nullcontext()
