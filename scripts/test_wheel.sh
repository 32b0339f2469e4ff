#!/usr/bin/env bash
# Tests the binary wheel as a user gets it: a fresh virtual environment (no build tree,
# no source folder on sys.path), `pip install dist/tenfold-*.whl` with the test suite's
# pinned packages (python/requirements-test.txt; not torch, so tenfold.torch's tests are
# skipped here), then the Python suite against the installed package, test_wheel.py included
# (the libraries the process loads, the OpenBLAS the wheel carries). Builds the wheel
# first when dist/ has none (scripts/build_wheel.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
compgen -G "$root/dist/tenfold-*.whl" >/dev/null || bash "$root/scripts/build_wheel.sh"
wheels=("$root"/dist/tenfold-*.whl)
[ ${#wheels[@]} -eq 1 ] || { echo "test_wheel.sh: expected one wheel in dist/, found ${#wheels[@]}" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
start=$(date +%s%N)
"$work/venv/bin/pip" install -q --disable-pip-version-check "${wheels[0]}" \
  "$(grep '^numpy==' "$root/python/requirements-test.txt")"
echo "pip install of the wheel (and NumPy): $(( ($(date +%s%N) - start) / 1000000 )) ms"
"$work/venv/bin/pip" install -q --disable-pip-version-check -r "$root/python/requirements-test.txt"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import ctypes, os, sys, tenfold
where = os.path.dirname(tenfold.__file__)
assert where.startswith(sys.prefix), where  # the installed package, not the source tree
blas = ctypes.CDLL(os.path.join(where, "libscipy_openblas.so"))
blas.scipy_openblas_get_corename.restype = ctypes.c_char_p
blas.scipy_openblas_get_config.restype = ctypes.c_char_p
print("tenfold from", where)
print("OpenBLAS:", blas.scipy_openblas_get_config().decode(), "kernel:",
      blas.scipy_openblas_get_corename().decode())
PY
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests"
