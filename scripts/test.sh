#!/usr/bin/env bash
# Installs the dependencies, builds Tenfold with its tests, and runs the whole suite.
set -euo pipefail
# Passive OpenMP waiting: on a busy machine, spinning threads slow small problems down.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
ctest --test-dir "$root/build" --output-on-failure -j "$(nproc)"
