#!/usr/bin/env bash
# The main job: installs the dependencies, builds Tenfold, and fits a rank-2 CP
# model to the real COVID-19 systems-serology tensor (438 samples x 6 antigens x
# 11 receptors, tests/data/COVID19_data.npy), printing the fit and the components.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
# The library and the program only: no tests, benchmarks, MPI component or CUDA objects
# (TENFOLD_WITH_CUDA=ON in the environment asks for those). scripts/test.sh builds the
# rest into the same folder.
"$root/scripts/build.sh" -DTENFOLD_BUILD_TESTS=OFF -DTENFOLD_BUILD_BENCH=OFF -DTENFOLD_WITH_MPI=OFF \
  -DTENFOLD_WITH_CUDA="${TENFOLD_WITH_CUDA:-OFF}"
out=$(mktemp -d)
"$root/build/tools/tenfold" cp "$root/tests/data/COVID19_data.npy" --rank 2 --init nvecs \
  --max-iters 1000 --tol 1e-8 --quiet --out "$out"
echo "Axes: 0 = samples, 1 = antigens, 2 = receptors. Outputs (factors, weights, report.json): $out"
