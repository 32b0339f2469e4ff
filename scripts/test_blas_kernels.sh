#!/usr/bin/env bash
# Runs the numerical C++ suites (ctest label `blas`) once more under each other OpenBLAS
# kernel family this processor can execute, so that an assertion that holds only for
# one kernel's rounding fails here on any machine: first the kernels OpenBLAS detects by
# itself (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, as on a fresh machine), then each
# family the CPU flags allow (OPENBLAS_CORETYPE = Prescott, Haswell, SkylakeX,
# Cooperlake; Zen runs Haswell's kernels), leaving out the one the caller's environment
# already tested (scripts/test.sh) and the detected one.
# Usage: bash scripts/test_blas_kernels.sh [BUILD_DIR] (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${1:-$root/build}
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() {
  local f
  for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done
}
avx512=(avx512f avx512dq avx512bw avx512vl avx512cd)
kernels=()
has pni && kernels+=(Prescott)
has avx2 fma && kernels+=(Haswell)
has "${avx512[@]}" && kernels+=(SkylakeX)
has "${avx512[@]}" avx512_bf16 && kernels+=(Cooperlake)
# The family OpenBLAS picks (its name for the kernels it loaded; Zen means Haswell's).
corename() {
  python3 - <<'PY'
import ctypes, ctypes.util
blas = ctypes.CDLL(ctypes.util.find_library("openblas") or "libopenblas.so.0")
blas.openblas_get_corename.restype = ctypes.c_char_p
name = blas.openblas_get_corename().decode()
print({"zen": "haswell"}.get(name.lower(), name.lower()))
PY
}
own=$(corename)
detected=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bash -c "$(declare -f corename); corename")
run() {
  local what=$1
  shift
  echo "== numerical suites with $what"
  local start=$SECONDS
  "$@" ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j "$(nproc)" -L blas
  echo "   ($what: $((SECONDS - start)) s)"
}
ran=0
if [ "$detected" != "$own" ]; then
  run "the detected kernels ($detected)" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
  ran=$((ran + 1))
fi
for k in "${kernels[@]}"; do
  case "${k,,}" in "$own" | "$detected") continue ;; esac
  run "OPENBLAS_CORETYPE=$k" env OPENBLAS_CORETYPE="$k"
  ran=$((ran + 1))
done
if [ "$ran" -lt 1 ]; then
  echo "test_blas_kernels.sh: no OpenBLAS kernel besides '$own' runs on this processor" >&2
  exit 1
fi
