#!/usr/bin/env bash
# Builds GenTen (Sandia) on Kokkos's OpenMP backend, for side-by-side CP-ALS timings:
#   bash bench/peers/build_genten.sh GENTEN_SRC KOKKOS_SRC [BUILD_DIR]
# GENTEN_SRC and KOKKOS_SRC are source trees fetched beforehand (this script downloads
# nothing), e.g.
#   git clone https://github.com/sandialabs/GenTen.git && git clone https://github.com/kokkos/kokkos.git
# BUILD_DIR (default build/peers/genten) receives kokkos-build/, kokkos-install/,
# genten-build/ and versions.txt (the commits and flags used). LAPACK is the system
# OpenBLAS that Tenfold links, so that both sides run the same kernels.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 GENTEN_SRC KOKKOS_SRC [BUILD_DIR]" >&2
  exit 2
fi
genten_src=$(cd "$1" && pwd)
kokkos_src=$(cd "$2" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-$root/build/peers/genten}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-$(nproc)}
lapack=${LAPACK_LIBS:-$(ls /usr/lib/*-linux-gnu/libopenblas.so* 2>/dev/null | head -n 1)}
if [ -z "$lapack" ]; then
  echo "$0: no OpenBLAS found; set LAPACK_LIBS to a LAPACK library" >&2
  exit 1
fi

# Kokkos: OpenMP, the host architecture detected by the compiler (-march=native).
kokkos_flags=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$out/kokkos-install"
  -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_OPENMP=ON -DKokkos_ARCH_NATIVE=ON
  -DKokkos_ENABLE_SERIAL=ON)
cmake -S "$kokkos_src" -B "$out/kokkos-build" "${kokkos_flags[@]}"
cmake --build "$out/kokkos-build" -j "$jobs" --target install

genten_flags=(-DCMAKE_BUILD_TYPE=Release -DKOKKOS_PATH="$out/kokkos-install"
  -DKokkos_DIR="$out/kokkos-install/lib/cmake/Kokkos" -DLAPACK_LIBS="$lapack"
  -DLAPACK_ADD_LIBS="-lpthread;-lm;-ldl" -Ddebug=OFF)
cmake -S "$genten_src" -B "$out/genten-build" "${genten_flags[@]}"
cmake --build "$out/genten-build" -j "$jobs"

commit() { git -C "$1" rev-parse HEAD 2>/dev/null || echo "not a git checkout"; }
{
  echo "genten $genten_src $(commit "$genten_src")"
  echo "kokkos $kokkos_src $(commit "$kokkos_src")"
  echo "compiler $(${CXX:-c++} --version | head -n 1)"
  echo "kokkos flags ${kokkos_flags[*]}"
  echo "genten flags ${genten_flags[*]}"
} > "$out/versions.txt"
echo "GenTen built in $out/genten-build (driver: bin/genten); versions in $out/versions.txt"
