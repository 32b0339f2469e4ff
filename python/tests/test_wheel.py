"""The installed binary wheel (scripts/build_wheel.sh, scripts/test_wheel.sh): what a
process that imports tenfold loads, and the OpenBLAS the wheel carries.

Skipped for a package that auditwheel did not repair (no tenfold.libs folder beside it).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tenfold

PACKAGE = Path(tenfold.__file__).resolve().parent
LIBS = PACKAGE.parent / "tenfold.libs"

pytestmark = pytest.mark.skipif(not LIBS.is_dir(), reason="not an installed binary wheel")

# Run in a fresh interpreter: NumPy and SciPy (their own OpenBLAS copies, started first),
# then the threads and the shared objects mapped before and after tenfold's import and a
# decomposition, and SciPy's LAPACK next to it.
PROBE = r"""
import ctypes, json, os, sys
import numpy as np
import scipy.linalg

def mapped():
    maps = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split(None, 5)[-1].strip()
            if ".so" in path:
                maps.add(os.path.realpath(path))
    return maps

maps_before = mapped()
threads_before = len(os.listdir("/proc/self/task"))
import tenfold
threads_after = len(os.listdir("/proc/self/task"))
x = np.random.default_rng(0).standard_normal((30, 20, 10))
cp = tenfold.parafac(x, 3, n_iter_max=5, init="random", random_state=0)
a = x.reshape(30, 200) @ x.reshape(30, 200).T
l = scipy.linalg.cholesky(a, lower=True)
blas = ctypes.CDLL(os.path.join(os.path.dirname(tenfold.__file__), "libscipy_openblas.so"))
blas.scipy_openblas_get_corename.restype = ctypes.c_char_p
maps = mapped()
json.dump({
    "threads": [threads_before, threads_after],
    "kernel": blas.scipy_openblas_get_corename().decode(),
    "parallel": blas.scipy_openblas_get_parallel(),
    "cholesky_error": float(np.abs(l @ l.T - a).max() / np.abs(a).max()),
    "finite": bool(np.isfinite(cp[1][0]).all()),
    "maps": sorted(maps),
    "added": sorted(maps - maps_before),
}, sys.stdout)
"""


@pytest.fixture(scope="module")
def probe():
    pytest.importorskip("scipy")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True, cwd="/"
    )
    return json.loads(out.stdout)


def system_library(path):
    """glibc's libraries and the C++ runtime, which the manylinux policy leaves to the
    system."""
    name = os.path.basename(path)
    return name.startswith(
        ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "ld-linux",
         "libstdc++.so", "libgcc_s.so")
    )


def test_tenfold_loads_nothing_from_outside_the_wheel_but_glibc_and_libstdcxx(probe):
    # What importing tenfold and running it adds to a process that has NumPy and SciPy
    # (and with them the interpreter's own modules and their system libraries) loaded.
    inside = (str(PACKAGE) + os.sep, str(LIBS) + os.sep)
    assert [p for p in probe["added"] if not system_library(p) and not p.startswith(inside)] == []
    # The wheel's own libraries are the ones in use.
    assert str(PACKAGE / "libtenfold.so.0") in probe["maps"]
    assert str(PACKAGE / "libscipy_openblas.so") in probe["maps"]
    assert any(os.path.basename(p).startswith("libgomp") for p in probe["maps"]
               if p.startswith(str(LIBS)))


def test_openblas_starts_no_threads_and_coexists_with_numpy_and_scipy(probe):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("a pthreads OpenBLAS starts no threads on one processor anyway")
    # A pthreads build started as it loads would add one thread per further processor.
    before, after = probe["threads"]
    assert after == before
    assert probe["parallel"] == 1  # the pthreads build, as the threading code assumes
    assert probe["kernel"]  # DYNAMIC_ARCH reports the kernel it chose
    assert probe["finite"]
    assert probe["cholesky_error"] < 1e-12  # SciPy's own OpenBLAS, loaded next to ours
    # NumPy's and SciPy's copies are files of their own beside the wheel's.
    openblas = [p for p in probe["maps"] if "openblas" in os.path.basename(p)]
    assert len(openblas) == len(set(openblas)) >= 2
