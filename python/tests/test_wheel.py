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

# Run in a fresh interpreter, in either order: NumPy and SciPy (their own OpenBLAS
# copies, started first) then tenfold, or tenfold first (NumPy comes with it, before the
# extension) then SciPy, whose copy has the same scipy_ prefix as the wheel's. Recorded:
# the threads and the shared objects mapped before and after tenfold's import and after a
# decomposition, what each of the three OpenBLAS copies reports, and NumPy's and SciPy's
# results next to tenfold's.
PROBE = r"""
import ctypes, json, os, sys
tenfold_first = sys.argv[1] == "tenfold-first"

def mapped():
    maps = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split(None, 5)[-1].strip()
            if ".so" in path:
                maps.add(os.path.realpath(path))
    return maps

def threads():
    return len(os.listdir("/proc/self/task"))

if not tenfold_first:
    import numpy as np
    import scipy.linalg
maps_before = mapped()
threads_before = threads()
import tenfold
import numpy as np
threads_import = threads()
maps_import = mapped()
x = np.random.default_rng(0).standard_normal((60, 50, 40))
cp = tenfold.parafac(x, 3, n_iter_max=5, init="random", random_state=0)
threads_parafac = threads()
maps_parafac = mapped()
if tenfold_first:
    import scipy.linalg
a = x.reshape(60, 2000) @ x.reshape(60, 2000).T  # NumPy's OpenBLAS
l = scipy.linalg.cholesky(a, lower=True)  # SciPy's
maps = mapped()

def library(prefix):
    found = [p for p in maps if os.path.basename(p).startswith(prefix)]
    return found[0] if len(found) == 1 else None

ours = ctypes.CDLL(os.path.join(os.path.dirname(tenfold.__file__), "libscipy_openblas.so"))
numpys = ctypes.CDLL(library("libscipy_openblas64_"))
scipys = ctypes.CDLL(library("libscipy_openblas-"))
ours.scipy_openblas_get_corename.restype = ctypes.c_char_p
json.dump({
    "threads": [threads_before, threads_import, threads_parafac],
    "pool": tenfold.num_threads(),
    "kernel": ours.scipy_openblas_get_corename().decode(),
    "reported": tenfold.show_config(mode="dicts")["blas"],
    "parallel": ours.scipy_openblas_get_parallel(),
    "blas_threads": {
        "ours": ours.scipy_openblas_get_num_threads(),
        "numpy": numpys.scipy_openblas_get_num_threads64_(),
        "scipy": scipys.scipy_openblas_get_num_threads(),
    },
    # Our copy exports its functions under the scipy_ prefix only, so that it cannot
    # stand in for another library's unprefixed BLAS.
    "unprefixed": [n for n in ("cblas_dgemm", "dgemm_", "LAPACKE_dpotrf", "dpotrf_",
                               "openblas_set_num_threads") if hasattr(ours, n)],
    "cholesky_error": float(np.abs(l @ l.T - a).max() / np.abs(a).max()),
    "finite": bool(np.isfinite(cp[1][0]).all()),
    "maps": sorted(maps),
    "added_import": sorted(maps_import - maps_before),
    "added_parafac": sorted(maps_parafac - maps_before),
}, sys.stdout)
"""


@pytest.fixture(scope="module", params=["numpy-first", "tenfold-first"])
def probe(request):
    pytest.importorskip("scipy")
    out = subprocess.run(
        [sys.executable, "-c", PROBE, request.param],
        check=True, capture_output=True, text=True, cwd="/",
    )
    return dict(json.loads(out.stdout), order=request.param)


def system_library(path):
    """glibc's libraries, the C++ runtime and zlib (the sparse reader's .tns.gz), which
    the manylinux policy leaves to the system."""
    name = os.path.basename(path)
    return name.startswith(
        ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "ld-linux",
         "libstdc++.so", "libgcc_s.so", "libz.so")
    )


def test_tenfold_loads_nothing_from_outside_the_wheel_but_glibc_and_libstdcxx(probe):
    # What importing tenfold, then running it, adds to a process that has NumPy and SciPy
    # (and with them the interpreter's own modules and their system libraries) loaded.
    if probe["order"] == "numpy-first":
        inside = (str(PACKAGE) + os.sep, str(LIBS) + os.sep)
        for added in (probe["added_import"], probe["added_parafac"]):
            assert [p for p in added if not system_library(p) and not p.startswith(inside)] == []
    # The wheel's own libraries are the ones in use.
    assert str(PACKAGE / "libtenfold.so.0") in probe["maps"]
    assert str(PACKAGE / "libscipy_openblas.so") in probe["maps"]
    assert any(os.path.basename(p).startswith("libgomp") for p in probe["maps"]
               if p.startswith(str(LIBS)))


def test_openblas_starts_no_threads_and_coexists_with_numpy_and_scipy(probe):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("a pthreads OpenBLAS starts no threads on one processor anyway")
    before, after_import, after_parafac = probe["threads"]
    if probe["order"] == "numpy-first":
        # A pthreads build started as it loads would add one thread per further processor.
        assert after_import == before
    # The decomposition adds the library's own pool, and nothing of OpenBLAS's.
    assert after_parafac - after_import == probe["pool"] - 1
    assert probe["parallel"] == 1  # the pthreads build, as the threading code assumes
    assert probe["kernel"]  # DYNAMIC_ARCH reports the kernel it chose
    assert probe["reported"]["library"] == "scipy-openblas"
    assert probe["reported"]["kernel"] == probe["kernel"]  # tenfold.show_config
    assert probe["unprefixed"] == []
    # Three copies, each with its own thread setting: the library set its own to one;
    # NumPy's and SciPy's keep theirs (one per processor).
    assert probe["blas_threads"]["ours"] == 1
    assert probe["blas_threads"]["numpy"] == probe["blas_threads"]["scipy"] > 1
    assert probe["finite"]
    assert probe["cholesky_error"] < 1e-12  # SciPy's own OpenBLAS, loaded next to ours
    openblas = [p for p in probe["maps"] if "openblas" in os.path.basename(p)]
    assert len(openblas) == len(set(openblas)) == 3
