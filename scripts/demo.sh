#!/usr/bin/env bash
# The main job: installs the dependencies, builds Tenfold, and fits a rank-2 CP
# model to the real COVID-19 systems-serology tensor (438 samples x 6 antigens x
# 11 receptors, tests/data/COVID19_data.npy), printing the fit and the components.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
out=$(mktemp -d)
"$root/build/tools/tenfold" cp "$root/tests/data/COVID19_data.npy" --rank 2 --init nvecs \
  --max-iters 1000 --tol 1e-8 --quiet --out "$out"
echo "Axes: 0 = samples, 1 = antigens, 2 = receptors. Outputs (factors, weights, report.json): $out"
