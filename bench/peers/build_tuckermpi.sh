#!/usr/bin/env bash
# Builds TuckerMPI (Sandia; its Kokkos version) with OpenMP, and MPI when mpicxx is found,
# for side-by-side ST-HOSVD timings:
#   bash bench/peers/build_tuckermpi.sh TUCKER_SRC KOKKOS_SRC KOKKOS_KERNELS_SRC [BUILD_DIR]
# The three source trees are fetched beforehand (this script downloads nothing), e.g.
#   git clone https://github.com/sandialabs/TuckerMPI.git
#   git clone https://github.com/kokkos/kokkos.git
#   git clone https://github.com/kokkos/kokkos-kernels.git
# BUILD_DIR (default build/peers/tuckermpi) receives the Kokkos and Kokkos Kernels
# installs, tucker-build/ and versions.txt. BLAS/LAPACK: the system OpenBLAS.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 TUCKER_SRC KOKKOS_SRC KOKKOS_KERNELS_SRC [BUILD_DIR]" >&2
  exit 2
fi
tucker_src=$(cd "$1" && pwd)
kokkos_src=$(cd "$2" && pwd)
kernels_src=$(cd "$3" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${4:-$root/build/peers/tuckermpi}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-$(nproc)}
prefix="$out/install"

cmake -S "$kokkos_src" -B "$out/kokkos-build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_OPENMP=ON \
  -DKokkos_ENABLE_SERIAL=ON -DKokkos_ARCH_NATIVE=ON
cmake --build "$out/kokkos-build" -j "$jobs" --target install
cmake -S "$kernels_src" -B "$out/kernels-build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DKokkos_ROOT="$prefix" -DKokkosKernels_ENABLE_TPL_BLAS=ON \
  -DKokkosKernels_ENABLE_TPL_LAPACK=ON
cmake --build "$out/kernels-build" -j "$jobs" --target install

tucker_flags=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17
  -DKokkosKernels_DIR="$prefix/lib/cmake/KokkosKernels" -DTUCKER_ENABLE_KOKKOS=ON)
if command -v mpicxx >/dev/null 2>&1; then
  tucker_flags+=(-DCMAKE_CXX_COMPILER="$(command -v mpicxx)" -DTUCKER_ENABLE_MPI=ON)
fi
cmake -S "$tucker_src/src" -B "$out/tucker-build" "${tucker_flags[@]}"
cmake --build "$out/tucker-build" -j "$jobs"

commit() { git -C "$1" rev-parse HEAD 2>/dev/null || echo "not a git checkout"; }
{
  echo "tuckermpi $tucker_src $(commit "$tucker_src")"
  echo "kokkos $kokkos_src $(commit "$kokkos_src")"
  echo "kokkos-kernels $kernels_src $(commit "$kernels_src")"
  echo "compiler $(${CXX:-c++} --version | head -n 1)"
  echo "tucker flags ${tucker_flags[*]}"
} > "$out/versions.txt"
echo "TuckerMPI built in $out/tucker-build; versions in $out/versions.txt"
