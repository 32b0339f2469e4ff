#!/usr/bin/env bash
# Builds the libFuzzer targets with clang into BUILD_DIR (default: build-fuzz in the
# repository) and runs each one for DURATION_SECONDS (default 30), starting from the
# seed corpus in fuzz/corpus/ (new inputs go to BUILD_DIR/corpus/, the seeds stay
# untouched). Exits non-zero when a target finds a crash; the input is saved as
# BUILD_DIR/<target>-crash-*.
set -euo pipefail
duration=${1:-30}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-fuzz}

# A build folder already configured with the fuzz targets (CI's sanitizer build, which has
# the tests too) is used as it is; any other is configured for the targets alone.
if ! grep -qs '^TENFOLD_BUILD_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  cmake -S "$root" -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTENFOLD_BUILD_FUZZ=ON -DTENFOLD_WITH_CUDA=OFF -DTENFOLD_BUILD_TESTS=OFF \
    -DTENFOLD_BUILD_BENCH=OFF > "$build.configure.log"
fi
cmake --build "$build" -j2 --target npy_fuzz safetensors_fuzz

for target in npy safetensors; do
  mkdir -p "$build/corpus/$target"
  echo "== ${target}_fuzz for ${duration} s"
  "$build/fuzz/${target}_fuzz" -max_total_time="$duration" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -dict="$root/fuzz/$target.dict" \
    -artifact_prefix="$build/${target}-" "$build/corpus/$target" "$root/fuzz/corpus/$target"
done
echo "no findings"
