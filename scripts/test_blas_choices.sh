#!/usr/bin/env bash
# Builds the library, the program and the C++ CPU test suites once per BLAS choice (the
# CMake option TENFOLD_BLAS, cmake/blas.cmake) into build-blas-<choice>/ and runs them
# (ctest -L cpu). Choices as arguments; default: all three, openblas (Debian's OpenBLAS,
# the default), scipy-openblas (the wheel's OpenBLAS, the pip package scipy-openblas32 at
# the version pyproject.toml pins, installed into the wheel tools' environment, WHEEL_VENV)
# and blis (Debian's BLIS, libblis-openmp-dev). Extra CMake arguments: CMAKE_ARGS.
# The last run's results: docs/performance.md, "BLAS choices".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
choices=("$@")
[ ${#choices[@]} -gt 0 ] || choices=(openblas scipy-openblas blis)
venv=${WHEEL_VENV:-$root/.venv-wheel}
for choice in "${choices[@]}"; do
  echo "== TENFOLD_BLAS=$choice"
  extra=()
  if [ "$choice" = scipy-openblas ]; then
    pin=$(grep -o '"scipy-openblas32==[^"]*"' "$root/pyproject.toml" | tr -d '"')
    [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$pin"
    extra+=("-DPython_EXECUTABLE=$venv/bin/python")
  fi
  start=$SECONDS
  BUILD_DIR="$root/build-blas-$choice" bash "$root/scripts/build.sh" -DTENFOLD_BLAS="$choice" \
    -DTENFOLD_WITH_CUDA=OFF -DTENFOLD_WITH_MPI=OFF -DTENFOLD_BUILD_BENCH=OFF "${extra[@]}" \
    ${CMAKE_ARGS:-}
  env -u OPENBLAS_CORETYPE ctest --test-dir "$root/build-blas-$choice" --output-on-failure \
    -j "$(nproc)" -L cpu -LE package
  echo "== TENFOLD_BLAS=$choice: built and passed in $((SECONDS - start)) s"
done
