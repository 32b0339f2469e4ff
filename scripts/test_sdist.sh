#!/usr/bin/env bash
# Tests the source distribution as a user gets it: `python -m build --sdist` (with the
# build tools of scripts/build_wheel.sh, WHEEL_VENV), then, in a fresh virtual
# environment outside the tree, `pip install tenfold-<version>.tar.gz`, the source
# build's command (`pip install .`) given the tarball: it compiles the library and the
# extension from the tarball alone, against the system's OpenBLAS (the README's set-up).
# Then the Python tests that need only NumPy, from the tarball's own copy of them, against
# the installed package (the tarball's source folder is not on sys.path).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
venv=${WHEEL_VENV:-$root/.venv-wheel}
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "build==1.3.0"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" -m build --sdist --outdir "$work/dist" "$root" >/dev/null
sdist=$(echo "$work"/dist/tenfold-*.tar.gz)
echo "sdist: $(basename "$sdist"), $(du -k "$sdist" | cut -f1) kB, $(tar tzf "$sdist" | wc -l) files"
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check \
  $(grep -E '^(numpy|pytest)==' "$root/python/requirements-test.txt")
start=$SECONDS
"$work/venv/bin/pip" install -q --disable-pip-version-check "$sdist"
echo "pip install of the sdist (compiles the library and the extension): $((SECONDS - start)) s"
mkdir "$work/src" && tar xzf "$sdist" -C "$work/src" --strip-components=1
cd "$work"
"$work/venv/bin/python" -c 'import sys, tenfold; assert tenfold.__file__.startswith(sys.prefix); tenfold.show_config()'
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
  src/python/tests/test_parafac.py src/python/tests/test_tucker.py \
  src/python/tests/test_arguments.py \
  src/python/tests/test_runtime.py::test_show_config_reports_the_blas_and_the_kernels_it_runs
