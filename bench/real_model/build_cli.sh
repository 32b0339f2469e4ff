#!/usr/bin/env bash
# Builds the tenfold program of the real-model benchmark in BUILD_DIR (default
# /tmp/build-real-model; configured once, without CUDA, benchmarks or tests) and prints
# its path.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-/tmp/build-real-model}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTENFOLD_WITH_CUDA=OFF \
    -DTENFOLD_BUILD_BENCH=OFF -DTENFOLD_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j 2 --target tenfold_cli >/dev/null
echo "$build/tools/tenfold"
