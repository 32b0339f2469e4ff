#!/usr/bin/env bash
# Runs the numerical C++ suites (ctest label `blas`) once more under every OpenBLAS
# kernel family this processor can execute (OPENBLAS_CORETYPE), so that an assertion
# that holds only for one kernel's rounding fails here on any machine. The kernel of
# the caller's environment (already tested by scripts/test.sh) is skipped.
# Usage: bash scripts/test_blas_kernels.sh [BUILD_DIR] (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${1:-$root/build}
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() {
  local f
  for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done
}
# Each kernel family and the instruction sets its kernels use (OpenBLAS 0.3.21).
kernels=()
has pni && kernels+=(Prescott)
has avx2 fma && kernels+=(Haswell Zen)
has avx512f avx512dq avx512bw avx512vl avx512cd && kernels+=(SkylakeX)
has avx512f avx512dq avx512bw avx512vl avx512cd avx512_bf16 && kernels+=(Cooperlake)
own=${OPENBLAS_CORETYPE:-}
ran=0
for k in "${kernels[@]}"; do
  if [ "${k,,}" = "${own,,}" ]; then continue; fi
  echo "== numerical suites with OPENBLAS_CORETYPE=$k"
  start=$SECONDS
  OPENBLAS_CORETYPE=$k ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" -L blas
  echo "   ($k: $((SECONDS - start)) s)"
  ran=$((ran + 1))
done
if [ "$ran" -lt 1 ]; then
  echo "no OpenBLAS kernel besides '$own' runs on this processor" >&2
  exit 1
fi
