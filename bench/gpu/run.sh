#!/usr/bin/env bash
# Device check for the CUDA backend, on a machine with an NVIDIA GPU (sm_90 build):
# configure and build the GPU tests and gpu_bench, run the GPU tests, then time the
# backend with gpu_bench. Results go to stdout and, when OUT is set, under $OUT
# (build.log, tests.log, gpu_results.txt).
#
# The machine needs CUDA, CMake and a C++20 compiler, and the build dependencies
# (OpenBLAS, LAPACKE, GoogleTest, Google Benchmark, CLI11, nlohmann-json). Where it
# lacks the latter and has no network:
#   bash bench/gpu/fetch_debs.sh   # beforehand, where Debian's archive is reachable
#   bash bench/gpu/run.sh          # on the device machine, with .deps/ carried along
# When configuring against the system's packages fails, the .deb files in .deps/ are
# unpacked with dpkg -x into a private prefix (TENFOLD_DEPS_PREFIX, default
# /tmp/tenfold-deps; nothing is installed), CMake searches that prefix first (build
# folder build-gpu-deps instead of build-gpu), and LD_LIBRARY_PATH points into it
# for the build and the runs. JOBS (default 16) sets the build's parallelism.
set -uo pipefail
cd "$(dirname "$0")/../.."

out=${OUT:-}
log() { if [ -n "$out" ]; then tee -a "$out/$1"; else cat; fi; }

cuda_compiler=()
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  cuda_compiler=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi

# configure BUILD_DIR [CMAKE_ARGS...]
configure() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DTENFOLD_WITH_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=90-real;90-virtual" -DTENFOLD_BUILD_TESTS=ON \
    -DTENFOLD_BUILD_BENCH=ON "${cuda_compiler[@]}" "$@" 2>&1 | log build.log
}

# Unpacks .deps/*.deb into the prefix; sets deps_args (CMake) and LD_LIBRARY_PATH.
deps_args=()
use_debs() {
  local prefix=${TENFOLD_DEPS_PREFIX:-/tmp/tenfold-deps} arch=x86_64-linux-gnu
  local debs=(.deps/*.deb)
  if [ ! -e "${debs[0]}" ]; then
    echo "run.sh: no .deps/*.deb to fall back on: run bench/gpu/fetch_debs.sh where" \
      "Debian's archive is reachable, and carry .deps to this machine" >&2
    return 1
  fi
  rm -rf "$prefix" && mkdir -p "$prefix" || return 1
  for deb in "${debs[@]}"; do dpkg -x "$deb" "$prefix" || return 1; done
  local usr=$prefix/usr
  local openblas=$usr/lib/$arch/openblas-openmp
  # Packages, LAPACKE and its header under usr; libopenblas.so and cblas.h sit in
  # OpenBLAS's own folders, which Debian's alternatives would have linked.
  deps_args=(-DCMAKE_PREFIX_PATH="$usr" -DCMAKE_LIBRARY_PATH="$openblas"
    -DCMAKE_INCLUDE_PATH="$usr/include/$arch/openblas-openmp")
  # OpenBLAS's libblas.so.3 and liblapack.so.3 (loaded by liblapacke), libgfortran.
  export LD_LIBRARY_PATH=$openblas:$usr/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "run.sh: using the packages of .deps/ unpacked in $prefix" | log build.log
}

{
  grep -s '^PRETTY_NAME=' /etc/os-release
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
} 2>&1 | log build.log

start=$SECONDS
build=build-gpu
if ! configure "$build"; then
  echo "run.sh: configuring with the system's packages failed" | log build.log
  build=build-gpu-deps
  use_debs || exit 1
  configure "$build" "${deps_args[@]}" || exit 1
fi
cmake --build "$build" -j"${JOBS:-16}" --target test_gpu test_cp test_tucker test_attention gpu_bench 2>&1 | log build.log || exit 1
built=$SECONDS

# The device-specific tests (label gpu), the primitives against the reference backend
# and the CP, Tucker and attention suites on cuda (test names ending in /cuda).
ctest --test-dir "$build" -R '^Gpu|/cuda$' --output-on-failure 2>&1 | log tests.log
tests=$?
tested=$SECONDS

"$build/bench/gpu_bench"
bench=$?

echo "seconds: configure and build $((built - start)), tests $((tested - built)), bench $((SECONDS - tested))"
echo "gpu tests: $([ $tests -eq 0 ] && echo passed || echo FAILED), gpu_bench: $([ $bench -eq 0 ] && echo ok || echo FAILED)"
[ $tests -eq 0 ] && [ $bench -eq 0 ]
