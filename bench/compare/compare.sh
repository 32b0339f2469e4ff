#!/usr/bin/env bash
# How does Tenfold compare? Builds the comparison driver, creates a virtual
# environment with TensorLy and NumPy (pinned in requirements.txt, from PyPI),
# then times both libraries side by side on the same tensors:
#   bash bench/compare/compare.sh [--quick] [--reps N] [--only TEXT] [--out DIR]
# BUILD_DIR (default build) is Tenfold's build folder, VENV (default .venv-compare)
# the environment; results go to --out (default build/compare).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-$root/build}
venv=${VENV:-$root/.venv-compare}
python=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ] || ! cmp -s bench/compare/requirements.txt "$venv/requirements.txt"; then
  echo "== creating $venv (TensorLy, NumPy from PyPI)"
  "$python" -m venv --clear "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r bench/compare/requirements.txt
  cp bench/compare/requirements.txt "$venv/requirements.txt"
fi

echo "== building tenfold_compare_driver in $build_dir"
cmake -S "$root" -B "$build_dir" -DTENFOLD_BUILD_BENCH=ON >/dev/null
cmake --build "$build_dir" --target tenfold_compare_driver -j "$(nproc)" >/dev/null

exec "$venv/bin/python" bench/compare/compare.py --driver "$build_dir/bench/tenfold_compare_driver" "$@"
