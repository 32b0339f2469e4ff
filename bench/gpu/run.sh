#!/usr/bin/env bash
# Device check for the CUDA backend, on a machine with an NVIDIA GPU (sm_90 build):
# configure and build into build-gpu, run the GPU tests, then time the backend
# with gpu_bench. Results go to stdout and, when OUT is set, under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."

build=build-gpu
out=${OUT:-}
log() { if [ -n "$out" ]; then tee -a "$out/$1"; else cat; fi; }

cuda_compiler=()
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  cuda_compiler=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | log build.log
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTENFOLD_WITH_CUDA=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=90-real;90-virtual" -DTENFOLD_BUILD_TESTS=ON \
  -DTENFOLD_BUILD_BENCH=ON "${cuda_compiler[@]}" 2>&1 | log build.log || exit 1
cmake --build "$build" -j16 2>&1 | log build.log || exit 1

ctest --test-dir "$build" -L gpu --output-on-failure 2>&1 | log tests.log
tests=$?

"$build/bench/gpu_bench"
bench=$?

echo "gpu tests: $([ $tests -eq 0 ] && echo passed || echo FAILED), gpu_bench: $([ $bench -eq 0 ] && echo ok || echo FAILED)"
[ $tests -eq 0 ] && [ $bench -eq 0 ]
