#!/usr/bin/env bash
# Tests the binary wheel as a user gets it: a fresh virtual environment (no build tree,
# no source folder on sys.path), `pip install dist/tenfold-*.whl` with the test suite's
# pinned packages (python/requirements-test.txt; not torch, so tenfold.torch's tests are
# skipped here), then the Python suite against the installed package, test_wheel.py included
# (the libraries the process loads, the OpenBLAS the wheel carries), with the Debian
# BLAS packages hidden where a mount namespace can be made. Builds the wheel first when
# dist/ has none (scripts/build_wheel.sh).
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
# Where this runs as root and may make a mount namespace of its own: the Debian BLAS
# packages' libraries hidden for the rest (an empty folder over each of their folders,
# /dev/null over each library file), so that the package shows it needs none of them.
hidden=()
if unshare -m true 2>/dev/null; then
  mkdir "$work/empty"
  lib=/usr/lib/x86_64-linux-gnu
  hide="set -e; "
  # The files first: most lie inside the folders.
  for name in libblas.so.3 liblapack.so.3 liblapacke.so.3 libopenblas.so.0 libblis.so.4; do
    file=$(readlink -f "$lib/$name" || true)
    [ -f "$file" ] && hide+="mount --bind /dev/null $file; "
  done
  for dir in "$lib"/openblas-* "$lib"/blis-*; do
    [ -d "$dir" ] && hide+="mount --bind $work/empty $dir; "
  done
  hidden=(unshare -m sh -c "$hide"'exec "$@"' sh)
  "${hidden[@]}" "$work/venv/bin/python" -c '
import ctypes
for name in ("libopenblas.so.0", "liblapacke.so.3", "libblas.so.3", "liblapack.so.3"):
    try:
        ctypes.CDLL(name)
    except OSError:
        continue
    raise SystemExit(name + " is still loadable")
print("Debian BLAS packages hidden for the tests")'
else
  echo "no mount namespace here: the tests run with the Debian BLAS packages present"
fi
"${hidden[@]}" "$work/venv/bin/python" - <<'PY'
import os, sys, tenfold
where = os.path.dirname(tenfold.__file__)
assert where.startswith(sys.prefix), where  # the installed package, not the source tree
print("tenfold from", where)
tenfold.show_config()
PY
"${hidden[@]}" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests"
