#!/usr/bin/env bash
# Builds TuckerMPI (Sandia) for side-by-side ST-HOSVD timings:
#   bash bench/peers/build_tuckermpi.sh TUCKER_SRC [BUILD_DIR]
# TUCKER_SRC is a TuckerMPI source tree fetched beforehand (this script downloads
# nothing): a git checkout, or an exported tree with its commit in TUCKER_SRC/.commit.
# What is built is TuckerMPI's BLAS/LAPACK + MPI code (src/serial and src/mpi, the code
# of the TuckerMPI paper, ACM TOMS 2020): the on-node driver bin/Tucker_sthosvd and, when
# CMake finds MPI (Debian's OpenMPI), the distributed driver bin/sthosvd. Threads come
# from the BLAS: the system OpenBLAS (Debian's OpenMP build, so OMP_NUM_THREADS sets
# them), the library Tenfold links. The repository's newer Kokkos port (src/kokkos, which
# needs Kokkos and Kokkos Kernels 4.0) is not built here.
# BUILD_DIR (default build/peers/tuckermpi) receives the build and versions.txt.
# Environment: JOBS (default 2), NICE (default 5).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 TUCKER_SRC [BUILD_DIR]" >&2
  exit 2
fi
tucker_src=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$root/build/peers/tuckermpi}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-2}
openblas=$(ls /usr/lib/*-linux-gnu/libopenblas.so 2>/dev/null | head -n 1)
if [ -z "$openblas" ]; then
  echo "$0: no OpenBLAS found (Debian: apt-get install libopenblas-dev)" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# TuckerMPI's CMake finds BLAS and LAPACK through FindBLAS/FindLAPACK: name OpenBLAS.
flags=(-DCMAKE_BUILD_TYPE=Release -DBLA_VENDOR=OpenBLAS)
nice -n "${NICE:-5}" cmake -S "$tucker_src/src" -B "$out" "${flags[@]}" "${launcher[@]}"
targets=(--target Tucker_sthosvd)
if cmake --build "$out" --target help | grep -q "^\.\.\. sthosvd$"; then
  targets+=(--target sthosvd)
fi
nice -n "${NICE:-5}" cmake --build "$out" "${targets[@]}" -j "$jobs"

commit() {
  if git -C "$1" rev-parse HEAD >/dev/null 2>&1; then
    git -C "$1" rev-parse HEAD
  elif [ -f "$1/.commit" ]; then
    cat "$1/.commit"
  else
    echo "unknown commit"
  fi
}
{
  echo "tuckermpi $(commit "$tucker_src") ($tucker_src; src/serial + src/mpi)"
  echo "compiler $(${CXX:-c++} --version | head -n 1)"
  echo "mpi $(mpirun --version 2>/dev/null | head -n 1 || echo none)"
  echo "blas $openblas ($(dpkg-query -W -f='${Package} ${Version}' libopenblas0-openmp 2>/dev/null || true))"
  echo "flags ${flags[*]}"
  echo "targets ${targets[*]}"
} > "$out/versions.txt"
echo "TuckerMPI built in $out (drivers: $(cd "$out" && find . -name Tucker_sthosvd -o -name sthosvd -type f | tr '\n' ' ')); versions in $out/versions.txt"
